"""Code started on a database `db upgrade` has not reached stops at start, naming what is missing
(app/db/schema_check.py): it answered "busy, retry" to everything while /health said ok."""

from __future__ import annotations

import os
import subprocess

import pytest
from alembic import command

from app.cli.database import alembic_config
from app.db import make_engine
from app.db.schema_check import SchemaBehind, missing, require_migrated
from tests.live import BIN, ROOT, free_port


def test_a_database_behind_the_code_is_named_and_one_at_head_passes(empty_owner_url):
    config = alembic_config(empty_owner_url)
    command.upgrade(config, "0003")
    engine = make_engine(empty_owner_url)
    absent = missing(engine)
    assert "table run_branches" in absent and "column users.last_namespace" in absent
    with pytest.raises(SchemaBehind, match="flask --app wsgi db upgrade"):
        require_migrated(engine)
    command.upgrade(config, "head")
    assert missing(engine) == []
    require_migrated(engine)
    engine.dispose()


def _env(url: str) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    return kept | {
        "ALMANAC_DATABASE_URL": url,
        "ALMANAC_SECRET_KEY": "schema-check-secret",
        "ALMANAC_SCHEDULER": "on",
    }


def test_servers_tickers_and_workers_refuse_to_start_on_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'behind.db'}"
    command.upgrade(alembic_config(url), "0003")
    before = (tmp_path / "behind.db").read_bytes()
    for args in (["scheduler", "run"], ["worker"]):
        done = subprocess.run(
            [str(BIN / "flask"), "--app", "wsgi", *args],
            cwd=ROOT,
            env=_env(url),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        assert "not migrated" in done.stderr and "table run_branches" in done.stderr
        assert "Traceback" not in done.stderr
    server = subprocess.run(
        [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{free_port()}", "wsgi:app"],
        cwd=ROOT,
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert server.returncode == 3
    assert "almanac: the database is not migrated for this version" in server.stderr
    # Nothing was written: no ticker beat, no first-start admin, no audit event.
    assert (tmp_path / "behind.db").read_bytes() == before


def test_an_upgrade_that_leaves_tables_missing_says_so_instead_of_upgraded(empty_owner_url):
    # A database made by a development build whose revision ids meant other steps was told
    # "upgraded to head" while it lacked tables; here one is dropped behind Alembic's back.
    from sqlalchemy import text

    from tests.conftest import make_test_app

    command.upgrade(alembic_config(empty_owner_url), "head")
    engine = make_engine(empty_owner_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE run_rollup"))
    engine.dispose()
    app = make_test_app(empty_owner_url, MIGRATION_DATABASE_URL=empty_owner_url)
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 1
    assert "lacks table run_rollup" in result.output and "upgraded" not in result.output


def test_a_database_unreachable_at_start_is_logged_once_with_its_cause(caplog):
    # The web starts anyway (it waits for the database as for any outage), but an operator
    # whose login or address is wrong learns it from the log, not only from /health.
    engine = make_engine("postgresql://almanac_app@127.0.0.1:1/nowhere")
    with caplog.at_level("WARNING", logger="app.db.schema_check"):
        require_migrated(engine)
    [record] = caplog.records
    assert "could not be reached at start" in record.getMessage()
    assert "127.0.0.1" in record.getMessage() and "nowhere" not in record.getMessage()


def test_scheduler_run_refuses_a_ticker_login_on_another_database(tmp_path):
    # With ALMANAC_SCHEDULER_DATABASE_URL the ticker writes there: one naming another database
    # ticked that one (its beats and firings landed in tables nobody served). Only the login
    # may differ; on SQLite, which has none, it must name the very same file.
    current = f"sqlite:///{tmp_path / 'current.db'}"
    behind = f"sqlite:///{tmp_path / 'behind.db'}"
    command.upgrade(alembic_config(current), "head")
    command.upgrade(alembic_config(behind), "0003")
    before = (tmp_path / "behind.db").read_bytes()
    done = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "scheduler", "run", "--workers", "0"],
        cwd=ROOT,
        env=_env(current) | {"ALMANAC_SCHEDULER_DATABASE_URL": behind},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "almanac: ALMANAC_SCHEDULER_DATABASE_URL names another database than "
        "ALMANAC_DATABASE_URL: both must name the same database (only the login differs)\n"
    )
    assert (tmp_path / "behind.db").read_bytes() == before


def test_a_database_behind_by_a_revision_that_renamed_nothing_is_refused(empty_owner_url):
    # 0015 only widened a column: every table and column name was there, so code at 0015
    # started on a database at 0014 in silence. Its revision number says it is behind.
    from app.cli.database import upgrade_database
    from app.db.schema_check import behind_revision

    upgrade_database(empty_owner_url, "0014")
    engine = make_engine(empty_owner_url)
    assert missing(engine) == []
    with pytest.raises(SchemaBehind, match=r"it is at revision 0014, this version needs 0015"):
        require_migrated(engine)
    if engine.dialect.name == "postgresql":
        # The logins read it too: `db upgrade` granted them the revision table.
        from sqlalchemy.engine import make_url

        for login in ("almanac_app", "almanac_scheduler"):
            as_login = make_engine(
                make_url(empty_owner_url)
                .set(username=login, password=None)
                .render_as_string(hide_password=False)
            )
            with as_login.connect() as conn:
                assert behind_revision(conn) == ("0014", "0015")
            as_login.dispose()
    upgrade_database(empty_owner_url)
    require_migrated(engine)
    engine.dispose()


def test_a_database_ahead_of_the_code_or_with_an_unreadable_revision_passes(empty_owner_url):
    from sqlalchemy import text

    from app.cli.database import upgrade_database

    upgrade_database(empty_owner_url)
    engine = make_engine(empty_owner_url)
    with engine.begin() as conn:
        # A later version's revision, unknown to this code (a roll back of the code).
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    require_migrated(engine)
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0014'"))
            conn.execute(text('REVOKE SELECT ON alembic_version FROM "almanac_app"'))
        from sqlalchemy.engine import make_url

        app_login = make_engine(
            make_url(empty_owner_url)
            .set(username="almanac_app", password=None)
            .render_as_string(hide_password=False)
        )
        # Migrated before the logins were granted the revision table: not checked, as before.
        require_migrated(app_login)
        with pytest.raises(SchemaBehind, match="revision 0014"):
            require_migrated(engine)
    engine.dispose()
