"""`flask --app wsgi users|tokens|namespaces|admin` commands against a real database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, func, select

from app.context import database
from app.db import Membership, Namespace, User
from tests.conftest import Api


@contextmanager
def other_commits_first(
    app, url: str, statement_start: str, change: Callable[[Any], None]
) -> Iterator[None]:
    """While the block runs, `change` is made and committed on another connection just before
    the app's first statement starting with `statement_start` (a race lost at that point)."""
    from app.db import Database

    other = Database(url)
    raced: list[str] = []

    def before(conn, cursor, statement, params, context, executemany):
        if not raced and statement.lstrip().upper().startswith(statement_start):
            raced.append(statement)
            with other.session() as session:
                change(session)
                session.commit()

    event.listen(database(app).engine, "before_cursor_execute", before)
    try:
        yield
    finally:
        event.remove(database(app).engine, "before_cursor_execute", before)
        other.dispose()
    assert raced, f"no statement started with {statement_start}"


def invoke_losing_a_race(
    app, runner, url: str, statement_start: str, change: Callable[[Any], None], args: list[str]
):
    """`args` run while `change` commits on another connection just before the command's first
    statement starting with `statement_start`; its result, which holds no traceback."""
    with other_commits_first(app, url, statement_start, change):
        result = runner.invoke(args=args)
    assert "Traceback" not in result.output
    return result


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
    for args in (
        ["admin", "bootstrap"],
        ["users", "create", "x", "--password", "long-enough-1"],
        ["users", "revoke", "x", "default"],
        ["users", "enable", "x"],
        ["namespaces", "set", "default", "--max-active-runs", "none"],
    ):
        result = runner.invoke(args=args)
        assert result.exit_code == 1, result.output
        assert "has no Almanac tables yet: run `flask --app wsgi db upgrade`" in result.output
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
    from tests.conftest import FIXED_NOW

    def other_creates(session):
        service.create_user(session, FIXED_NOW, "raceuser", "the-other-password")

    args = ["users", "create", "raceuser", "--password", "long-enough-1"]
    result = invoke_losing_a_race(
        app, runner, postgres_owner_url, "INSERT INTO USERS", other_creates, args
    )
    assert result.exit_code == 1, result.output
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


def _console_sign_in(app, username: str, password: str):
    """A browser signed in to the console as `username`."""
    from tests.console.test_pages import sign_in

    browser = app.test_client()
    assert sign_in(browser, username, password).status_code == 302
    return browser


def test_users_revoke_takes_one_namespace_away_at_once(app, runner, client, accounts):
    # There was no way to take a user out of one namespace: only `users disable`, which took
    # every namespace away.
    alice = accounts.create("alice", "operator", "nsa")
    accounts.create("bob", "viewer", "nsb")
    assert runner.invoke(args=["users", "grant", "alice", "nsb", "viewer"]).exit_code == 0
    api = Api(client, alice.token)
    browser = _console_sign_in(app, "alice", alice.password)
    assert api.get("/namespaces/nsa/schedules").status_code == 200
    assert browser.get("/ns/nsa/schedules").status_code == 200

    result = runner.invoke(args=["users", "revoke", "alice", "nsa"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "alice is no longer operator in nsa"

    # Her token: nsa answers as a namespace she was never in; nsb still works.
    refused = api.get("/namespaces/nsa/schedules")
    assert refused.status_code == 404
    assert refused.get_json()["error"]["code"] == "NOT_FOUND"
    assert api.get("/namespaces/nsb/schedules").status_code == 200
    assert [n["name"] for n in api.get("/namespaces").get_json()["items"]] == ["nsb"]
    assert [n["name"] for n in api.get("/me").get_json()["namespaces"]] == ["nsb"]
    # Her console session, signed in before the revoke: the same on its next request.
    assert browser.get("/ns/nsa/schedules").status_code == 404
    assert browser.get("/ns/nsb/schedules").status_code == 200

    again = runner.invoke(args=["users", "revoke", "alice", "nsa"])
    assert again.exit_code == 0, again.output
    assert again.output.strip() == "alice has no role in nsa; nothing changed"
    assert api.get("/namespaces/nsb/schedules").status_code == 200


def test_users_revoke_of_an_unknown_user_or_namespace_is_a_clean_error(app, runner, accounts):
    accounts.create("alice", "operator", "nsa")
    for args, said in (
        (["users", "revoke", "ghost", "nsa"], "Error: user 'ghost' does not exist"),
        (["users", "revoke", "alice", "nope"], "Error: namespace 'nope' does not exist"),
    ):
        result = runner.invoke(args=args)
        assert result.exit_code == 1, result.output
        assert result.output.strip() == said


@pytest.mark.parametrize("backend", ["postgres"])
def test_users_revoke_losing_a_race_says_nothing_changed(app, runner, accounts, postgres_owner_url):
    # Two `users revoke alice nsa` at once: the other commits while this one is between finding
    # the user and namespace and removing the membership.
    from app.auth import service

    accounts.create("alice", "operator", "nsa")

    def other_revokes(session):
        assert service.revoke_role(session, "alice", "nsa")[1] == "operator"

    args = ["users", "revoke", "alice", "nsa"]
    result = invoke_losing_a_race(
        app, runner, postgres_owner_url, "DELETE FROM MEMBERSHIPS", other_revokes, args
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "alice has no role in nsa; nothing changed"


def test_users_enable_undoes_disable(app, runner, client, accounts):
    # `users disable` could not be undone.
    erin = accounts.create("erin")
    browser = _console_sign_in(app, "erin", erin.password)
    assert runner.invoke(args=["users", "disable", "erin"]).exit_code == 0
    assert Api(client, erin.token).get("/namespaces").status_code == 401

    result = runner.invoke(args=["users", "enable", "erin"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "enabled user erin (disabled since 2026-01-05T12:00:00+00:00)"
    # Her unrevoked token works again, with her roles as they were.
    assert Api(client, erin.token).get("/namespaces/default/schedules").status_code == 200
    # The console session disabling ended stays ended: she signs in again.
    assert "/login" in browser.get("/ns/default/schedules").headers["Location"]
    again = _console_sign_in(app, "erin", erin.password)
    assert again.get("/ns/default/schedules").status_code == 200

    twice = runner.invoke(args=["users", "enable", "erin"])
    assert twice.exit_code == 0, twice.output
    assert twice.output.strip() == "user erin is not disabled; nothing changed"
    unknown = runner.invoke(args=["users", "enable", "ghost"])
    assert unknown.exit_code == 1 and unknown.output.strip() == "Error: user 'ghost' does not exist"


def test_users_enable_keeps_revoked_tokens_revoked(app, runner, client, accounts):
    erin = accounts.create("erin")
    assert runner.invoke(args=["users", "disable", "erin"]).exit_code == 0
    assert runner.invoke(args=["tokens", "revoke", "erin", "test"]).exit_code == 0
    assert runner.invoke(args=["users", "enable", "erin"]).exit_code == 0
    assert Api(client, erin.token).get("/namespaces").status_code == 401


def test_namespaces_set_changes_the_limit(app, runner, admin_api):
    # The limit could be set only when the namespace was created.
    created = runner.invoke(args=["namespaces", "create", "billing", "--max-active-runs", "3"])
    assert created.exit_code == 0, created.output

    def reported() -> int | None:
        items = admin_api.get("/namespaces").get_json()["items"]
        return {n["name"]: n["max_active_runs"] for n in items}["billing"]

    result = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", "5"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "max_active_runs of billing: 3 -> 5"
    assert reported() == 5
    result = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", "none"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "max_active_runs of billing: 5 -> none"
    assert reported() is None
    result = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", "none"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "max_active_runs of billing is none already; nothing changed"


def test_namespaces_set_refuses_what_create_refuses(app, runner):
    created = runner.invoke(args=["namespaces", "create", "billing", "--max-active-runs", "3"])
    assert created.exit_code == 0, created.output
    for value in ("0", "-1", "many"):
        result = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", value])
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--max-active-runs'" in result.output
    result = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", "2147483648"])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == "Error: max_active_runs: must be from 1 to 2147483647"
    missing = runner.invoke(args=["namespaces", "set", "billing"])
    assert missing.exit_code == 2 and "Missing option '--max-active-runs'" in missing.output
    unknown = runner.invoke(args=["namespaces", "set", "nope", "--max-active-runs", "1"])
    assert unknown.exit_code == 1, unknown.output
    assert unknown.output.strip() == "Error: namespace 'nope' does not exist"
    # Nothing refused changed the limit.
    shown = runner.invoke(args=["namespaces", "set", "billing", "--max-active-runs", "3"])
    assert shown.output.strip() == "max_active_runs of billing is 3 already; nothing changed"


def test_namespaces_set_applies_at_the_next_tick(h, runner):
    h.create("s", cron="*/10 * * * *")
    h.create("hog", cron="0 0 1 1 *")
    assert h.post("hog", "trigger").get_json()["outcome"] == "triggered"
    set_one = runner.invoke(args=["namespaces", "set", "default", "--max-active-runs", "1"])
    assert set_one.exit_code == 0, set_one.output
    assert [r["outcome"] for r in h.tick("12:10")] == ["refused"]
    cleared = runner.invoke(args=["namespaces", "set", "default", "--max-active-runs", "none"])
    assert cleared.exit_code == 0, cleared.output
    assert [r["outcome"] for r in h.tick("12:10:30")] == ["triggered"]


def test_users_revoke_blocks_the_users_schedules_in_that_namespace(h, runner, api_for):
    h.create("s")
    result = runner.invoke(args=["users", "revoke", "olga", "default"])
    assert result.exit_code == 0, result.output
    assert [r["outcome"] for r in h.tick("12:05")] == ["blocked"]
    data = api_for("pavel", "operator").get("/schedules/s").get_json()
    assert data["status"] == "blocked" and data["blocked_reason"] == "principal_unauthorized"


def test_users_revoke_of_a_superuser_says_it_still_reaches_the_namespace(
    app, runner, client, accounts
):
    root = accounts.create("root", "admin", "nsa", superuser=True)
    result = runner.invoke(args=["users", "revoke", "root", "nsa"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "root is no longer admin in nsa (root is a superuser: it still reaches nsa)"
    )
    assert Api(client, root.token).get("/namespaces/nsa/schedules").status_code == 200


def test_users_grant_says_what_it_changed(app, runner, accounts):
    accounts.create("alice", "viewer", "nsa")
    for role, said in (
        ("operator", "alice is operator in nsa (was viewer)"),
        # Said "alice is operator in nsa" again, as if it had changed something.
        ("operator", "alice is already operator in nsa; nothing changed"),
    ):
        result = runner.invoke(args=["users", "grant", "alice", "nsa", role])
        assert result.exit_code == 0, result.output
        assert result.output.strip() == said
    with database(app).session() as session:
        assert session.scalars(select(Membership.role)).all() == ["operator"]


@pytest.mark.parametrize("backend", ["postgres"])
def test_users_grant_losing_a_race_for_the_membership_still_grants(
    app, runner, accounts, postgres_owner_url
):
    # Two `users grant alice nsb ...` at once for a membership neither found: the second
    # insert crashed with the unique violation's traceback. Here the other grant commits
    # between this one's look and its insert; the later grant's role is the one kept.
    from app.auth import service

    accounts.create("alice", "viewer", "nsa")
    accounts.create("bob", "viewer", "nsb")

    def other_grants(session):
        assert service.grant_role(session, "alice", "nsb", "viewer") is None

    args = ["users", "grant", "alice", "nsb", "operator"]
    result = invoke_losing_a_race(
        app, runner, postgres_owner_url, "INSERT INTO MEMBERSHIPS", other_grants, args
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "alice is operator in nsb"
    with database(app).session() as session:
        roles = session.execute(
            select(Namespace.name, Membership.role)
            .join(Namespace, Namespace.id == Membership.namespace_id)
            .join(User, User.id == Membership.user_id)
            .where(User.username == "alice")
            .order_by(Namespace.name)
        ).all()
    assert [tuple(row) for row in roles] == [("nsa", "viewer"), ("nsb", "operator")]


def test_users_disable_twice_says_it_was_disabled_already(app, runner, accounts):
    accounts.create("erin")
    first = runner.invoke(args=["users", "disable", "erin"])
    assert first.exit_code == 0, first.output
    assert first.output.strip() == "disabled user erin"
    # Said "disabled user erin" again, as if it had done something.
    again = runner.invoke(args=["users", "disable", "erin"])
    assert again.exit_code == 0, again.output
    assert again.output.strip().startswith("user erin was already disabled (since ")
    assert again.output.strip().endswith("); nothing changed")
