"""One-shot commands meet a database that is away, refuses their login, or is not migrated: one
line on stderr naming the cause and the setting, exit 1, no traceback, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from app.context import database
from app.db import ApiToken, Namespace, make_engine
from app.db.roles import SCHEDULER_ROLE
from tests.conftest import login_url, make_test_app

PASSWORD = "s3cret-pw-never-shown"
# Row security and logins are PostgreSQL's.
postgres_only = pytest.mark.parametrize("backend", ["postgres"])

ACCOUNT_COMMANDS = [
    ["admin", "bootstrap"],
    ["tokens", "create", "admin", "--name", "x"],
    ["users", "create", "bob", "--password", "long-enough-1"],
    ["namespaces", "create", "ops"],
    ["secrets", "rotate"],
]
MIGRATION_COMMANDS = [["db", "upgrade"], ["db", "downgrade", "0008"], ["db", "create-roles"]]
TICKS = [["scheduler", "tick"], ["scheduler", "tick", "--json"], ["scheduler", "tick", "--work"]]


def _invoke(url: str, args: list[str], **config: str | None):
    app = make_test_app(url, **config)
    try:
        return app.test_cli_runner().invoke(args=args)
    finally:
        database(app).dispose()


def _assert_one_clean_line(result, *needles: str) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert PASSWORD not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def unreachable(backend: str, tmp_path: Path) -> tuple[str, str]:
    """A database URL nothing answers at (with a password), and the driver's cause."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'no-such-dir' / 'almanac.db'}", "unable to open database"
    return f"postgresql://almanac_app:{PASSWORD}@127.0.0.1:1/almanac", "Connection refused"


@pytest.mark.parametrize("args", ACCOUNT_COMMANDS + TICKS, ids=" ".join)
def test_commands_name_an_unreachable_database_in_one_line(unreachable, args):
    url, why = unreachable
    result = _invoke(url, args)
    _assert_one_clean_line(result, why, "(ALMANAC_DATABASE_URL)")


@pytest.mark.parametrize("args", MIGRATION_COMMANDS, ids=" ".join)
def test_migrations_name_the_setting_their_login_comes_from(unreachable, backend, args):
    url, why = unreachable
    if backend == "sqlite" and args == ["db", "create-roles"]:
        # SQLite has no logins: create-roles connects to nothing and says so.
        result = _invoke(url, args, MIGRATION_DATABASE_URL=url)
        assert result.exit_code == 0 and "SQLite has no logins: nothing to do" in result.output
        return
    result = _invoke(url, args, MIGRATION_DATABASE_URL=url)
    _assert_one_clean_line(result, why, "ALMANAC_MIGRATION_DATABASE_URL")
    result = _invoke(url, args)
    _assert_one_clean_line(result, why, "ALMANAC_DATABASE_URL (ALMANAC_MIGRATION_DATABASE_URL")


def test_a_json_tick_lists_the_unreachable_database_in_its_failures(unreachable):
    url, why = unreachable
    result = _invoke(url, ["scheduler", "tick", "--json"])
    _assert_one_clean_line(result, why)
    printed = json.loads(result.stdout)
    assert printed["rows"] == [] and len(printed["failures"]) == 1
    failure = printed["failures"][0]
    assert set(failure) == {"phase", "where", "cause"}
    assert failure["phase"] == "tick" and failure["where"] == ""
    assert why in failure["cause"] and "ALMANAC_DATABASE_URL" in failure["cause"]


def test_a_tick_names_the_scheduler_login_when_it_has_one(unreachable):
    url, why = unreachable
    result = _invoke(url, ["scheduler", "tick"], SCHEDULER_DATABASE_URL=url)
    _assert_one_clean_line(result, why, "(ALMANAC_SCHEDULER_DATABASE_URL)")


# Logins are PostgreSQL's (the fixture skips without it).
@pytest.mark.parametrize("args", ACCOUNT_COMMANDS + TICKS + MIGRATION_COMMANDS, ids=" ".join)
def test_a_login_that_does_not_exist_is_named_in_one_line(postgres_owner_url, args):
    url = login_url(postgres_owner_url, "almanac_no_such_login")
    result = _invoke(url, args, MIGRATION_DATABASE_URL=url)
    line = _assert_one_clean_line(result, 'role "almanac_no_such_login" does not exist')
    assert "ALMANAC_" in line


@postgres_only
@pytest.mark.parametrize(
    "args",
    [
        ["tokens", "create", "admin", "--name", "x"],
        ["namespaces", "create", "ops"],
        ["users", "revoke-sessions", "admin"],
        ["tokens", "revoke", "admin", "test"],
        ["users", "create", "bob", "--password", "long-enough-1"],
    ],
    ids=" ".join,
)
def test_account_commands_as_the_scheduler_login_are_refused_in_one_line(
    app, accounts, postgres_owner_url, args
):
    account = accounts.create("admin")
    assert account.token

    def counts() -> tuple[int, int]:
        with database(app).session() as session:
            return (
                session.scalar(select(func.count()).select_from(Namespace)),
                session.scalar(select(func.count()).select_from(ApiToken)),
            )

    before = counts()
    result = _invoke(login_url(postgres_owner_url, SCHEDULER_ROLE), args)
    line = _assert_one_clean_line(
        result,
        "the database refused it: permission denied for table",
        "account commands need the app login almanac_app or the owner",
        "ALMANAC_DATABASE_URL",
    )
    assert line.count("\n") == 0
    assert counts() == before


@pytest.mark.parametrize("args", [["scheduler", "tick"], ["scheduler", "tick", "--json"]])
def test_a_tick_on_an_older_schema_refuses_and_writes_nothing(empty_owner_url, args):
    url = empty_owner_url
    upgraded = _invoke(url, ["db", "upgrade", "0008"], MIGRATION_DATABASE_URL=url)
    assert upgraded.exit_code == 0, upgraded.output
    result = _invoke(url, args, CLOCK="system")
    _assert_one_clean_line(result, "table run_rollup", "`flask --app wsgi db upgrade`")
    if "--json" in args:
        printed = json.loads(result.stdout)
        assert [f["phase"] for f in printed["failures"]] == ["schema"]
        assert "table run_rollup" in printed["failures"][0]["cause"]
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(text("SELECT count(*) FROM ticker_beats")) == 0
            assert conn.scalar(text("SELECT version_num FROM alembic_version")) == "0008"
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "args", [*ACCOUNT_COMMANDS, ["demo", "seed", "--hours", "1"]], ids=" ".join
)
def test_commands_on_a_database_never_migrated_say_to_upgrade_in_one_line(empty_owner_url, args):
    # `secrets rotate` printed a traceback (relation "runs" does not exist) where the account
    # commands said to run `db upgrade`.
    result = _invoke(empty_owner_url, args)
    _assert_one_clean_line(
        result,
        "the database has no Almanac tables yet: run `flask --app wsgi db upgrade` as the "
        "schema's owner",
    )


@pytest.mark.parametrize(
    ("revision", "said"),
    [
        # 0001 made the accounts' tables only: the commands wrote accounts into it anyway.
        ("0001", "(it lacks table "),
        # 0014 has every table and column: only its revision says it is behind.
        ("0014", "(it is at revision 0014, this version needs 0015)"),
    ],
)
@pytest.mark.parametrize("args", ACCOUNT_COMMANDS, ids=" ".join)
def test_commands_on_a_database_migrated_only_partly_refuse_before_writing(
    empty_owner_url, args, revision, said
):
    # They wrote to such a database (exit 0) where the serving processes refused to start;
    # `secrets rotate` said the database had no Almanac tables yet.
    from alembic import command
    from sqlalchemy import inspect

    from app.cli.database import alembic_config

    command.upgrade(alembic_config(empty_owner_url), revision)
    result = _invoke(empty_owner_url, args)
    _assert_one_clean_line(result, "the database is not migrated for this version " + said)
    engine = make_engine(empty_owner_url)
    try:
        with engine.connect() as conn:
            for table in ("users", "namespaces", "api_tokens"):
                if table in inspect(conn).get_table_names():
                    assert conn.scalar(text(f"SELECT count(*) FROM {table}")) == 0
    finally:
        engine.dispose()
