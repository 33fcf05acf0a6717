"""A statement the database refuses for what only an operator can fix (the web's login lacks a
grant, the schema is not migrated) answers 503 saying what to check, and logs one line naming the
cause, no traceback: it answered 500 INTERNAL with two tracebacks per request."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import text

from app.context import clock, database
from app.db import make_engine
from app.db.roles import APP_ROLE
from tests.conftest import FIXED_NOW, Accounts, fresh_postgres, login_url, make_test_app
from tests.console.test_pages import sign_in


@pytest.fixture
def own_database() -> Iterator[str]:
    """A database of this test alone (the owner's URL): its grants may be revoked freely, as
    grants belong to the objects of one database."""
    with fresh_postgres() as owner:
        yield owner


def _app(owner: str) -> Flask:
    app = make_test_app(login_url(owner, APP_ROLE))
    with database(app).session() as session:
        clock(app).set(session, FIXED_NOW)  # type: ignore[union-attr]
        session.commit()
    return app


def _revoke(owner: str, statement: str) -> None:
    engine = make_engine(owner)
    with engine.begin() as conn:
        conn.execute(text(statement))
    engine.dispose()


def _refusal_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_api_request_the_database_refuses_answers_503_and_logs_one_line(own_database, caplog):
    app = _app(own_database)
    try:
        account = Accounts(app).create("admin", "admin")
        _revoke(own_database, "REVOKE SELECT ON api_tokens FROM almanac_app")
        client = app.test_client()
        with caplog.at_level(logging.INFO):
            response = client.get(
                "/api/v1/me", headers={"Authorization": f"Bearer {account.token}"}
            )
        assert response.status_code == 503, response.json
        error = response.json["error"]
        assert error["code"] == "DATABASE_REFUSED"
        assert "the database refused" in error["message"]
        assert "grant" in error["message"] and "migrated" in error["message"]
        # Nothing of the statement, the table or the token is sent back.
        for secret in ("SELECT", "api_tokens", account.token):
            assert secret not in response.get_data(as_text=True)
        [line] = _refusal_lines(caplog)
        assert line.exc_info is None
        message = line.getMessage()
        assert "GET /api/v1/me" in message
        assert "permission denied for table api_tokens" in message
        assert "check this login's grants" in message
        assert "SELECT" not in message
    finally:
        database(app).dispose()


def test_a_console_page_the_database_refuses_is_the_503_page(own_database, caplog):
    app = _app(own_database)
    try:
        Accounts(app).create("alice", "operator")
        client = app.test_client()
        assert sign_in(client, "alice", "pw-alice-secret").status_code == 302
        _revoke(own_database, "REVOKE SELECT ON schedules FROM almanac_app")
        with caplog.at_level(logging.INFO):
            response = client.get("/ns/default/schedules")
        assert response.status_code == 503
        assert b"The database refused this request" in response.data
        assert b"permission denied" not in response.data
        [line] = _refusal_lines(caplog)
        assert line.exc_info is None
        assert "permission denied for table schedules" in line.getMessage()
    finally:
        database(app).dispose()


def test_an_api_request_on_a_sqlite_file_never_migrated_is_refused_not_busy(tmp_path, caplog):
    # SQLite says "no such table" as an OperationalError: it answered 503 BACKEND_BUSY, which
    # clients retry as if the database would come back by itself.
    app = make_test_app(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        with caplog.at_level(logging.INFO):
            response = app.test_client().get(
                "/api/v1/me", headers={"Authorization": "Bearer alm_any"}
            )
        assert response.status_code == 503, response.json
        assert response.json["error"]["code"] == "DATABASE_REFUSED"
        assert "Retry-After" not in response.headers
        [line] = _refusal_lines(caplog)
        assert line.exc_info is None and "no such table" in line.getMessage()
    finally:
        database(app).dispose()
