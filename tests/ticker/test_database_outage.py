"""The database going away and coming back (bench/soak.py --restart-postgres drills it for real).

While "down", every statement on every engine fails as a dropped connection does (the driver's
own OperationalError, which SQLAlchemy wraps and treats as a disconnect).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event

from app.ticker import runs as tick_runs
from app.ticker.tick import run_tick
from tests.console.test_pages import sign_in

EXECUTIONS = ("do_execute", "do_execute_no_params", "do_executemany")


@contextmanager
def database_down() -> Iterator[None]:
    """Every statement sent to the driver, on every engine, fails as on a dropped connection."""

    def refuse(cursor: Any, statement: str, *args: Any) -> None:
        raise args[-1].dialect.loaded_dbapi.OperationalError(
            "server closed the connection unexpectedly"
        )

    for name in EXECUTIONS:
        event.listen(Engine, name, refuse)
    try:
        yield
    finally:
        for name in EXECUTIONS:
            event.remove(Engine, name, refuse)


def test_health_and_the_api_answer_503_while_the_database_is_away_then_200(client, admin_api):
    assert client.get("/api/v1/health").status_code == 200
    with database_down():
        health = client.get("/api/v1/health")
        listed = admin_api.get("/schedules")
    assert health.status_code == 503
    assert health.get_json()["database"] == "unreachable: OperationalError"
    assert listed.status_code == 503 and listed.headers["Retry-After"] == "1"
    assert listed.get_json()["error"]["code"] == "BACKEND_BUSY"
    # No restart: the same app reconnects on its own.
    assert client.get("/api/v1/health").get_json()["database"] == "ok"
    assert admin_api.get("/schedules").status_code == 200


def test_a_tick_while_the_database_is_away_loses_nothing_within_the_grace_window(h, app):
    h.create("s", cron="* * * * *", overlap_policy="allow_all")
    assert [r["outcome"] for r in h.tick("12:01:00")] == ["triggered"]
    h.set_clock("12:02:05")
    with database_down(), pytest.raises(Exception, match="server closed the connection"):
        run_tick(app)
    # Back 40 s later, still inside the 60 s grace: the 12:02 occurrence fires, once.
    rows = h.tick("12:02:45")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("triggered", "2026-01-05T12:02:00Z")
    ]
    assert h.tick("12:02:50") == []
    ledger = h.ledger()
    assert [(o["kind"], o["instant"]) for o in ledger] == [
        ("started", "2026-01-05T12:01:00Z"),
        ("started", "2026-01-05T12:02:00Z"),
    ]
    assert [r.run_id for r in h.runs()] == [
        "schedule:s:20260105T120100Z",
        "schedule:s:20260105T120200Z",
    ]


def test_the_console_shows_a_503_page_while_the_database_is_away_then_the_page(client, accounts):
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    with database_down():
        page = client.get("/ns/default/schedules")
    assert page.status_code == 503
    assert "The database is unavailable" in page.get_data(as_text=True)
    assert client.get("/ns/default/schedules").status_code == 200


def test_an_unknown_console_page_during_the_outage_is_the_503_page(client, accounts):
    # The error page shows who is signed in, which is read from the database.
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    with database_down():
        pages = [client.get("/nope"), client.get("/ns/default/nope")]
    for page in pages:
        assert page.status_code == 503 and page.mimetype == "text/html"
        assert "The database is unavailable" in page.get_data(as_text=True)
    assert client.get("/nope").status_code == 404


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_writer_that_waits_out_sqlites_write_lock_gets_503_backend_busy(
    app, admin_api, monkeypatch
):
    # Another thread of this process holds the write lock past the wait (a long tick): the
    # request waiting behind it is 503 BACKEND_BUSY with Retry-After, as a busy database is,
    # and never a 500 (the queue's own timeout escaped the error handlers).
    import threading

    from app.context import database
    from app.db import session as sessions
    from app.db.session import begin_write

    monkeypatch.setattr(sessions, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with database(app).session() as session:
            begin_write(session)
            holding.set()
            done.wait(10)
            session.rollback()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        busy = admin_api.post("/namespaces", json={"name": "later"})
    finally:
        done.set()
        holder.join()
    assert busy.status_code == 503, busy.get_data(as_text=True)[:300]
    assert busy.get_json()["error"]["code"] == "BACKEND_BUSY"
    assert busy.headers["Retry-After"] == "1"
    assert admin_api.post("/namespaces", json={"name": "later"}).status_code == 201


def test_a_working_tick_cut_off_in_its_work_reports_what_it_fired_and_the_failure(
    h, app, monkeypatch
):
    """`scheduler tick --work` / `/admin/tick {"work": true}`: the fire phase committed its rows
    before the work broke off; the tick's answer keeps them and names the work's failure."""
    h.create("s", cron="* * * * *", overlap_policy="allow_all")
    h.set_clock("12:01:00")
    worked: list[int] = []
    real = tick_runs.engine.work_once

    def once_then_away(*args: Any, **kwargs: Any) -> int:
        if worked:
            with database_down():
                return real(*args, **kwargs)
        worked.append(real(*args, **kwargs))
        return worked[-1]

    monkeypatch.setattr(tick_runs.engine, "work_once", once_then_away)
    result = run_tick(app, work=True)
    assert [(r["schedule_id"], r["outcome"]) for r in result.rows] == [("s", "triggered")]
    assert worked == [1] and result.steps == 1
    assert [f["phase"] for f in result.failures] == ["work"]
    assert "server closed the connection" in result.failures[0]["cause"]
    # The run it fired is there, and the step worked before the failure is kept.
    (run,) = h.runs("s")
    assert run.status == "completed"
