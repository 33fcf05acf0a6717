"""`flask --app wsgi users|tokens|namespaces|admin` commands against a real database."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select

from app.context import database
from app.db import Membership, Namespace, User
from tests.conftest import Api


def test_users_create_grant_and_token_reach_the_api(app, runner, client):
    result = runner.invoke(args=["namespaces", "create", "billing", "--max-active-runs", "3"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        args=["users", "create", "dana", "--password-stdin"], input="a-long-password\n"
    )
    assert result.exit_code == 0, result.output
    assert runner.invoke(args=["users", "grant", "dana", "billing", "viewer"]).exit_code == 0
    result = runner.invoke(args=["tokens", "create", "dana", "--name", "laptop"])
    assert result.exit_code == 0, result.output
    token = result.output.strip().splitlines()[-1]
    response = Api(client, token).get("/namespaces")
    assert [n["name"] for n in response.get_json()["items"]] == ["billing"]
    assert response.get_json()["items"][0]["max_active_runs"] == 3

    assert runner.invoke(args=["tokens", "revoke", "dana", "laptop"]).exit_code == 0
    assert Api(client, token).get("/namespaces").status_code == 401


def test_disable_blocks_tokens(app, runner, client, accounts):
    account = accounts.create("erin")
    assert Api(client, account.token).get("/namespaces").status_code == 200
    assert runner.invoke(args=["users", "disable", "erin"]).exit_code == 0
    assert Api(client, account.token).get("/namespaces").status_code == 401


def test_cli_errors_are_clean(app, runner):
    result = runner.invoke(args=["users", "grant", "ghost", "default", "viewer"])
    assert result.exit_code != 0
    assert "user 'ghost' does not exist" in result.output
    result = runner.invoke(args=["users", "create", "x", "--password", "short"])
    assert result.exit_code != 0 and "at least 8" in result.output


def test_bootstrap_creates_admin_once_with_generated_password(db_url):
    from tests.conftest import make_test_app

    app = make_test_app(db_url, ADMIN_USER="boss", ADMIN_TOKEN="alm_fixed_token_for_test")
    runner = app.test_cli_runner()
    result = runner.invoke(args=["admin", "bootstrap"])
    assert result.exit_code == 0, result.output
    password = result.output.strip().rsplit("password: ", 1)[1]
    assert len(password) >= 12
    with database(app).session() as session:
        user = session.scalar(select(User).where(User.username == "boss"))
        assert user.is_superuser
        role = session.scalar(
            select(Membership.role).join(Namespace).where(Namespace.name == "default")
        )
        assert role == "admin"
    response = Api(app.test_client(), "alm_fixed_token_for_test").get("/namespaces")
    assert [n["name"] for n in response.get_json()["items"]] == ["default"]
    again = runner.invoke(args=["admin", "bootstrap"])
    assert "nothing to bootstrap" in again.output
    # The token setting applies on the first start only: saying so, not seeming to take it.
    assert "ALMANAC_ADMIN_TOKEN applies on a first start only" in again.output


def test_commands_on_a_database_without_tables_say_to_upgrade_it(tmp_path):
    from tests.conftest import make_test_app

    app = make_test_app(f"sqlite:///{tmp_path / 'empty.db'}")
    runner = app.test_cli_runner()
    for args in (["admin", "bootstrap"], ["users", "create", "x", "--password", "long-enough-1"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 1, result.output
        assert "run `flask --app wsgi db upgrade` first" in result.output
        assert "Traceback" not in result.output
    for verb in ("upgrade", "downgrade"):
        result = runner.invoke(args=["db", verb, "bogus"])
        assert result.exit_code == 1, result.output
        assert f"{verb} refused, nothing was changed" in result.output and "bogus" in result.output


def test_first_start_creates_the_admin_when_a_password_is_set(db_url, monkeypatch):
    # The first superuser was made only by `admin bootstrap` (which `make run` calls): a server
    # started on its own with ALMANAC_ADMIN_PASSWORD and _TOKEN set answered that token 401.
    from tests.conftest import make_test_app

    settings = {"ADMIN_PASSWORD": "first-start-pw", "ADMIN_TOKEN": "alm_first_start_token_1"}
    # A flask command other than `run` (it may come before `db upgrade`) creates nobody.
    monkeypatch.setenv("FLASK_RUN_FROM_CLI", "true")
    monkeypatch.setattr("sys.argv", ["flask", "--app", "wsgi", "users", "list"])
    make_test_app(db_url, **settings)
    monkeypatch.undo()
    app = make_test_app(db_url, **settings)
    response = Api(app.test_client(), "alm_first_start_token_1").get("/me")
    assert response.status_code == 200
    assert response.get_json()["username"] == "admin" and response.get_json()["superuser"]
    # Starting again (another worker, a restart) creates nothing more.
    make_test_app(db_url, **settings | {"ADMIN_TOKEN": "alm_first_start_token_2"})
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1
    assert Api(app.test_client(), "alm_first_start_token_2").get("/me").status_code == 401


def test_first_start_creates_the_admin_once_the_database_answers(empty_owner_url):
    # A server that came up before its database (or before `db upgrade`) logged a warning and
    # never created the superuser: nobody could sign in until it was restarted.
    from app.cli.database import upgrade_database
    from tests.conftest import make_test_app

    token = "alm_first_start_token_later"
    app = make_test_app(empty_owner_url, ADMIN_PASSWORD="first-start-pw", ADMIN_TOKEN=token)
    upgrade_database(empty_owner_url)
    response = Api(app.test_client(), token).get("/me")
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["username"] == "admin" and response.get_json()["superuser"]
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1


def test_a_password_the_rules_refuse_stops_the_start_even_with_the_database_down(tmp_path):
    from app.settings import SettingError
    from tests.conftest import make_test_app

    unreachable = f"sqlite:///{tmp_path / 'no-such-folder' / 'almanac.db'}"
    with pytest.raises(SettingError, match="ALMANAC_ADMIN_USER, _PASSWORD or _TOKEN"):
        make_test_app(unreachable, ADMIN_PASSWORD="short")


def test_first_start_with_a_password_the_rules_refuse_does_not_start(db_url):
    from app.settings import SettingError
    from tests.conftest import make_test_app

    with pytest.raises(SettingError, match="ALMANAC_ADMIN_USER, _PASSWORD or _TOKEN"):
        make_test_app(db_url, ADMIN_PASSWORD="short")


@pytest.mark.parametrize("backend", ["postgres"])
def test_users_create_losing_a_race_for_its_name_says_it_exists(app, runner, postgres_owner_url):
    # Two `users create raceuser` at once: the one whose insert came second crashed with the
    # unique violation's traceback. Here the other create commits while this one is between
    # looking for the name and inserting it (PostgreSQL: SQLite's writers take turns).
    from app.auth import service
    from app.db import Database
    from tests.conftest import FIXED_NOW

    other = Database(postgres_owner_url)
    raced: list[str] = []

    @event.listens_for(database(app).engine, "before_cursor_execute")
    def _other_create_commits_first(conn, cursor, statement, params, context, executemany):
        if not raced and statement.lstrip().upper().startswith("INSERT INTO USERS"):
            raced.append(statement)
            with other.session() as session:
                service.create_user(session, FIXED_NOW, "raceuser", "the-other-password")
                session.commit()

    try:
        result = runner.invoke(args=["users", "create", "raceuser", "--password", "long-enough-1"])
    finally:
        event.remove(database(app).engine, "before_cursor_execute", _other_create_commits_first)
        other.dispose()
    assert raced, "the insert was never reached"
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.strip() == "Error: user 'raceuser' already exists"
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1


def test_revoking_a_revoked_token_says_it_was_revoked_already(app, runner, accounts):
    accounts.create("dana")
    first = runner.invoke(args=["tokens", "revoke", "dana", "test"])
    assert first.exit_code == 0, first.output
    assert first.output.strip() == "revoked token 'test' of dana"
    # Said "revoked" again, as if it had done something.
    again = runner.invoke(args=["tokens", "revoke", "dana", "test"])
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (
        "token 'test' of dana was already revoked (at 2026-01-05T12:00:00+00:00); nothing changed"
    )


@pytest.mark.parametrize(
    "command", [["users", "create", "frank"], ["users", "set-password", "erin"]]
)
def test_a_password_given_both_ways_is_a_usage_error(app, runner, accounts, command):
    accounts.create("erin")
    result = runner.invoke(
        args=[*command, "--password", "from-the-arguments", "--password-stdin"],
        input="from-standard-input\n",
    )
    assert result.exit_code == 2, result.output
    assert "--password or --password-stdin, not both" in result.output
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1
