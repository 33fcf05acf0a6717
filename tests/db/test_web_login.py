"""A web process started with a login that may not do what the web does stops at start, and
`/health` says "refused" when it may not read tokens: started as the scheduler's login it
passed `/health` and answered every API request with a 500 (PostgreSQL: SQLite has no logins)."""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import text

from app.db import Database, make_engine
from app.db.clock import SystemClock
from app.db.roles import APP_ROLE, SCHEDULER_ROLE
from app.db.schema_check import (
    SchemaBehind,
    missing_app_grants,
    require_app_grants,
    require_migrated,
)
from app.ticker import health as ticker_health
from tests.conftest import fresh_postgres, login_url
from tests.live import BIN, ROOT, free_port

OFF = {"SCHEDULER": "off", "TICK_SECONDS": 1.0}


def test_the_scheduler_login_lacks_the_webs_grants_and_the_app_login_has_them(
    postgres_owner_url,
):
    for role, lacks in ((APP_ROLE, False), (SCHEDULER_ROLE, True)):
        engine = make_engine(login_url(postgres_owner_url, role))
        login, lacking = missing_app_grants(engine)
        engine.dispose()
        assert login == role and bool(lacking) is lacks, (role, lacking)
    # Reads first: what every request needs.
    assert lacking[:2] == ["SELECT on users", "SELECT on api_tokens"]
    assert "INSERT on users" in lacking and "SELECT on runs" not in lacking
    with pytest.raises(SchemaBehind, match="serve the web as almanac_app"):
        require_app_grants(make_engine(login_url(postgres_owner_url, SCHEDULER_ROLE)))
    require_app_grants(make_engine(login_url(postgres_owner_url, APP_ROLE)))
    # SQLite has no logins: nothing to lack.
    assert missing_app_grants(make_engine("sqlite://")) == (None, [])


def test_a_web_on_a_login_row_security_does_not_fence_is_warned_about(postgres_owner_url, caplog):
    # The suite's owner is the cluster's superuser: it starts (it may do everything), warned.
    with caplog.at_level("WARNING", logger="app.db.schema_check"):
        require_app_grants(make_engine(postgres_owner_url))
        require_app_grants(make_engine(login_url(postgres_owner_url, APP_ROLE)))
    [record] = caplog.records
    assert "row security does not apply to" in record.getMessage()
    assert "serve the web as almanac_app" in record.getMessage()


def test_health_says_refused_for_a_login_that_may_not_read_tokens(postgres_owner_url):
    for role, database, status in (
        (APP_ROLE, "ok", "ok"),
        (SCHEDULER_ROLE, "refused: ProgrammingError", "degraded"),
    ):
        db = Database(login_url(postgres_owner_url, role))
        report = ticker_health.health(db, SystemClock(), OFF)
        db.dispose()
        assert (report["database"], report["status"]) == (database, status), role


def test_gunicorn_as_the_scheduler_login_exits_3_naming_the_login_to_use(postgres_owner_url):
    kept = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env = kept | {
        "ALMANAC_DATABASE_URL": login_url(postgres_owner_url, SCHEDULER_ROLE),
        "ALMANAC_SECRET_KEY": "web-login-secret",
        "ALMANAC_SCHEDULER": "off",
    }
    server = subprocess.run(
        [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{free_port()}", "wsgi:app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert server.returncode == 3, server.stderr
    assert "the login almanac_scheduler may not do what the web does" in server.stderr
    assert "SELECT on api_tokens" in server.stderr and "as almanac_app" in server.stderr
    assert "Traceback" not in server.stderr


def test_a_login_without_its_sequences_or_its_users_is_caught_at_start_and_by_health():
    # Table grants alone let the web start, then every insert answered 500 (no next id), and
    # a login that may not read `users` answered every request 500 while /health said ok.
    with fresh_postgres() as owner:
        engine = make_engine(owner)
        with engine.begin() as conn:
            conn.execute(text("REVOKE USAGE ON SEQUENCE namespaces_id_seq FROM almanac_app"))
            conn.execute(text("REVOKE SELECT ON users FROM almanac_app"))
        engine.dispose()
        app_login = make_engine(login_url(owner, APP_ROLE))
        login, lacking = missing_app_grants(app_login)
        app_login.dispose()
        assert login == APP_ROLE
        assert lacking == ["SELECT on users", "USAGE on sequence namespaces_id_seq"]
        db = Database(login_url(owner, APP_ROLE))
        report = ticker_health.health(db, SystemClock(), OFF)
        db.dispose()
        assert report["database"] == "refused: ProgrammingError"


def test_a_table_locked_at_start_does_not_stall_the_schema_check(postgres_owner_url, caplog):
    # Reading a column's default locks its table: LOCK TABLE elsewhere stalled every process's
    # start (and `scheduler tick`) in silence until it was released.
    holder = make_engine(postgres_owner_url).connect()
    holder.execute(text("SET idle_in_transaction_session_timeout = '15s'"))
    holder.execute(text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))
    try:
        with caplog.at_level("WARNING", logger="app.db.schema_check"):
            require_migrated(make_engine(login_url(postgres_owner_url, APP_ROLE)))
        [record] = caplog.records
        assert "the schema could not be checked at start: a table is locked" in record.getMessage()
    finally:
        holder.rollback()
        holder.close()
