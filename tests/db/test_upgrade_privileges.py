"""`db upgrade` checks its login's privileges first; `db create-roles` is idempotent."""

from __future__ import annotations

import os
import subprocess

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from app.cli.database import alembic_config
from app.db import make_engine
from app.db.roles import BUSINESS_TABLES
from tests.conftest import fresh_postgres, login_url, make_test_app
from tests.live import BIN, ROOT

# Logins, ownership and role membership are PostgreSQL's: each test has its own database.
WEAK = "almanac_test_migrator"


def _cli(url: str, *args: str):
    app = make_test_app(url, MIGRATION_DATABASE_URL=url)
    return app.test_cli_runner().invoke(args=list(args))


def _state(url: str) -> tuple[str | None, set[str], bool]:
    engine = make_engine(url)
    with engine.connect() as conn:
        version = conn.scalar(text("SELECT version_num FROM alembic_version"))
        tables = set(inspect(conn).get_table_names())
        secured = conn.scalar(text("SELECT relrowsecurity FROM pg_class WHERE relname = 'runs'"))
    engine.dispose()
    return version, tables, bool(secured)


def _migrating_login(conn, name: str, attributes: str) -> None:
    """A login (cluster-wide, kept across runs) that may create in the schema and move its
    revision, and owns nothing."""
    conn.execute(text("SELECT pg_advisory_xact_lock(7310013)"))
    if not conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": name}):
        conn.execute(text(f"CREATE ROLE {name} LOGIN {attributes} NOSUPERUSER NOBYPASSRLS"))
    conn.execute(text(f"GRANT CREATE, USAGE ON SCHEMA public TO {name}"))
    conn.execute(text(f"GRANT SELECT, UPDATE ON alembic_version TO {name}"))


@pytest.fixture
def at_0003():
    """A database at revision 0003, its owner's URL, and a login that may create but owns
    nothing and is no member of the catalog role."""
    with fresh_postgres(migrate=False) as owner:
        result = _cli(owner, "db", "upgrade", "0003")
        assert result.exit_code == 0, result.output
        engine = make_engine(owner)
        with engine.begin() as conn:
            _migrating_login(conn, WEAK, "")
        engine.dispose()
        yield owner


def test_an_upgrade_by_a_login_lacking_privileges_changes_nothing_and_names_them(at_0003):
    before = _state(at_0003)
    result = _cli(login_url(at_0003, WEAK), "db", "upgrade")
    assert result.exit_code == 1
    assert "upgrade refused, nothing was changed" in result.output
    assert "ownership of table schedules (owned by postgres)" in result.output
    assert "ownership of table run_history_events (owned by postgres)" in result.output
    assert "membership in role almanac_catalog" in result.output
    assert f"a superuser grants it: GRANT almanac_catalog TO {WEAK}" in result.output
    # CREATE alone does not let it hand CREATE on to the catalog role, as revision 0008 does.
    assert "CREATE WITH GRANT OPTION on schema public" in result.output
    assert _state(at_0003) == before == ("0003", before[1], False)
    assert "scheduler_cursors" not in before[1]
    engine = make_engine(at_0003)
    with engine.connect() as conn:
        # It granted nobody any role.
        member = conn.scalar(
            text("SELECT count(*) FROM pg_auth_members WHERE member = CAST(:r AS regrole)"),
            {"r": WEAK},
        )
    engine.dispose()
    assert member == 0


def test_the_owner_upgrades_then_grants_the_logins(at_0003):
    result = _cli(at_0003, "db", "upgrade")
    assert result.exit_code == 0, result.output
    assert "granted almanac_app" in result.output and "granted almanac_scheduler" in result.output
    version, tables, secured = _state(at_0003)
    head = ScriptDirectory.from_config(alembic_config(at_0003)).get_current_head()
    assert version == head and {"scheduler_cursors", "run_rollup"} <= tables and secured


def test_create_roles_is_idempotent_and_says_what_it_did(at_0003):
    first = _cli(at_0003, "db", "create-roles")
    second = _cli(at_0003, "db", "create-roles")
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    for role in ("almanac_app", "almanac_scheduler", "almanac_catalog"):
        assert f"updated role {role} (" in second.output
    assert "NOBYPASSRLS" in second.output
    assert second.output.count("granted") == 2


def test_an_upgrade_as_the_app_login_names_what_it_lacks_instead_of_failing(at_0003):
    # The likeliest mistake: no migration URL, so `db upgrade` runs as the app's login, which
    # may not read the schema's revision at all.
    before = _state(at_0003)
    result = _cli(login_url(at_0003, "almanac_app"), "db", "upgrade")
    assert result.exit_code == 1
    assert "upgrade refused, nothing was changed" in result.output
    assert "SELECT and UPDATE on table alembic_version (owned by postgres" in result.output
    # Refused by the check (a clean exit), not by a permission error escaping as a traceback.
    assert isinstance(result.exception, SystemExit)
    assert _state(at_0003) == before


@pytest.mark.parametrize("login", ["almanac_app", "almanac_scheduler"])
def test_a_first_upgrade_as_a_process_login_says_to_migrate_as_the_owner(login):
    """On an empty database the check found CREATE and almanac_catalog missing and printed the
    GRANT that would give a process's login the schema and every namespace's rows."""
    with fresh_postgres(migrate=False) as owner:
        result = _cli(login_url(owner, login), "db", "upgrade")
        assert result.exit_code == 1
        assert "upgrade refused, nothing was changed" in result.output
        assert f"{login} is the login Almanac's processes run as" in result.output
        assert "ALMANAC_MIGRATION_DATABASE_URL" in result.output
        assert "GRANT" not in result.output and "almanac_catalog" not in result.output
        engine = make_engine(owner)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
        engine.dispose()


def test_create_roles_by_a_login_that_may_not_alter_them_changes_nothing_and_says_so(at_0003):
    # The roles exist (the fixture made them), so this login would have to ALTER them.
    result = _cli(login_url(at_0003, WEAK), "db", "create-roles")
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "create-roles refused, nothing was changed" in result.output
    assert "must be superuser" in result.output
    assert "run it as a superuser" in result.output


def test_a_downgrade_by_the_app_login_is_refused_without_a_traceback(at_0003):
    before = _state(at_0003)
    result = _cli(login_url(at_0003, "almanac_app"), "db", "downgrade", "0002")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "downgrade refused: permission denied" in result.output
    assert _state(at_0003) == before


def test_a_refused_downgrade_prints_its_refusal_and_nothing_as_if_it_had_run(at_0003):
    """The command as an operator runs it: alembic's setup lines ("Context impl …") no longer
    precede the refusal; a downgrade that runs still logs its "Running downgrade" lines."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    app_login = login_url(at_0003, "almanac_app")
    env = kept | {"ALMANAC_SECRET_KEY": "downgrade-test-secret", "ALMANAC_DATABASE_URL": app_login}
    flask = [str(BIN / "flask"), "--app", "wsgi", "db", "downgrade"]
    refused = subprocess.run(
        [*flask, "0002"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "downgrade refused: permission denied for table alembic_version",
        "  run it as the schema's owner (ALMANAC_MIGRATION_DATABASE_URL)",
    ]
    done = subprocess.run(
        [*flask, "0002"],
        cwd=ROOT,
        env=env | {"ALMANAC_MIGRATION_DATABASE_URL": at_0003},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == "database downgraded to 0002\n"
    ran = [line.split(": ", 1)[1] for line in done.stderr.splitlines()]
    assert ran == ["Running downgrade 0003 -> 0002, schedules revisions ledger and audit"]


def _sequence_usage(url: str) -> dict[str, dict[str, bool]]:
    """Every sequence of the schema -> login -> whether it may use it."""
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.relname, has_sequence_privilege('almanac_app', c.oid, 'USAGE'), "
                "has_sequence_privilege('almanac_scheduler', c.oid, 'USAGE') FROM pg_class c "
                "WHERE c.relkind = 'S' AND c.relnamespace = current_schema()::regnamespace"
            )
        ).all()
    engine.dispose()
    return {name: {"app": app, "scheduler": scheduler} for name, app, scheduler in rows}


ACCOUNT_SEQUENCES = {
    "users_id_seq",
    "api_tokens_id_seq",
    "console_sessions_id_seq",
    "memberships_id_seq",
    "namespaces_id_seq",
    "login_failures_id_seq",
}


def test_the_scheduler_login_may_use_no_sequence_of_the_accounts(at_0003):
    """It writes no accounts, so it may neither count nor use up their ids (an earlier version
    granted every sequence to both logins: a re-run of the grants takes that back)."""
    engine = make_engine(at_0003)
    with engine.begin() as conn:
        for role in ("almanac_app", "almanac_scheduler"):
            conn.execute(text(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "{role}"'))
    engine.dispose()
    result = _cli(at_0003, "db", "upgrade")
    assert result.exit_code == 0, result.output
    usage = _sequence_usage(at_0003)
    assert ACCOUNT_SEQUENCES <= set(usage)
    assert {"runs_id_seq", "schedules_id_seq", "run_history_events_id_seq"} <= set(usage)
    assert all(each["app"] for each in usage.values()), usage
    # The scheduler inserts only into the business tables (under row security).
    business = {f"{table}_id_seq" for table in BUSINESS_TABLES}
    assert {name for name, each in usage.items() if each["scheduler"]} == business & set(usage)
    assert not ACCOUNT_SEQUENCES & business
    scheduler = make_engine(login_url(at_0003, "almanac_scheduler"))
    with scheduler.connect() as conn, pytest.raises(Exception, match="permission denied"):
        conn.execute(text("SELECT nextval('users_id_seq')"))
    scheduler.dispose()


NOINHERIT = "almanac_test_noinherit"


def test_a_member_that_does_not_inherit_the_catalog_role_is_refused_before_anything(at_0003):
    """Membership alone passed the check, but a NOINHERIT login may not replace what the
    catalog role owns: revision 0011 then failed midway (or an upgrade to 0008 left the
    due-work function callable by everyone). Now the check names it first."""
    engine = make_engine(at_0003)
    with engine.begin() as conn:
        _migrating_login(conn, NOINHERIT, "NOINHERIT")
        conn.execute(text(f"GRANT almanac_catalog TO {NOINHERIT}"))
    engine.dispose()
    before = _state(at_0003)
    for target in ("head", "0008"):
        result = _cli(login_url(at_0003, NOINHERIT), "db", "upgrade", target)
        assert result.exit_code == 1, result.output
        assert "upgrade refused, nothing was changed" in result.output
        assert (
            "the privileges of role almanac_catalog: this login is a member but does not "
            "inherit them (NOINHERIT, on it or on a role between it and almanac_catalog; a "
            f"superuser allows it: ALTER ROLE {NOINHERIT} INHERIT, or on that role)"
        ) in result.output
        assert "must be owner" not in result.output
        assert _state(at_0003) == before


def test_an_upgrade_with_nothing_pending_still_checks_the_grants_it_makes(at_0003):
    """At head, the upgrade only grants the logins their tables; a login that owns none of
    them got PostgreSQL's raw 'permission denied' instead of the check's list."""
    assert _cli(at_0003, "db", "upgrade").exit_code == 0
    before = _state(at_0003)
    result = _cli(login_url(at_0003, WEAK), "db", "upgrade")
    assert result.exit_code == 1, result.output
    assert "upgrade refused, nothing was changed" in result.output
    assert "ownership of table activations (owned by postgres)" in result.output
    assert "ownership of table users (owned by postgres)" in result.output
    assert "permission denied" not in result.output
    # Nothing pending: CREATE on the schema is not asked for.
    assert "CREATE on schema" not in result.output
    assert _state(at_0003) == before
