"""`/health` tells a dead ticker apart even in a process that hosts none (the web of a
deployment whose tickers are `scheduler run` processes): it said ok with nothing ticking."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from app.context import database
from app.db import TickerBeat
from app.db.clock import ManualClock, SystemClock
from app.ticker import health as ticker_health

OFF = {"SCHEDULER": "off", "TICK_SECONDS": 1.0}


def _beat(app, seconds_ago: float) -> None:
    when = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    with database(app).session() as session:
        session.merge(TickerBeat(ticker_id="elsewhere:1", last_tick_at=when, last_tick_clock=when))
        session.commit()


def test_a_web_process_without_a_ticker_reports_the_deployments_dead_ticker(app):
    db = database(app)
    # No ticker ever beat (a deployment driving ticks by hand): nothing to say.
    assert ticker_health.health(db, SystemClock(), OFF)["status"] == "ok"
    _beat(app, 0.5)
    fresh = ticker_health.health(db, SystemClock(), OFF)
    assert fresh["status"] == "ok" and fresh["ticker"]["enabled"] is False
    _beat(app, 30)
    dead = ticker_health.health(db, SystemClock(), OFF)
    assert dead["status"] == "degraded" and dead["ticker"]["lag_seconds"] >= 30
    # On the manual clock ticks come only when asked for: silence says nothing.
    assert ticker_health.health(db, ManualClock(), OFF)["status"] == "ok"


def test_a_database_that_refuses_is_told_apart_from_one_that_does_not_answer(app, monkeypatch):
    # A login without its grants got "unreachable", though the database answered.
    from sqlalchemy.exc import OperationalError, ProgrammingError

    db = database(app)
    for error, said in (
        (ProgrammingError("SELECT", {}, Exception("permission denied")), "refused"),
        (OperationalError("SELECT", {}, Exception("connection refused")), "unreachable"),
        # A SQLite file missing a table said "unreachable", where the API says DATABASE_REFUSED.
        (OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x")), "refused"),
    ):

        def failing(_session, error=error):
            raise error

        monkeypatch.setattr(ticker_health, "_last_beat", failing)
        report = ticker_health.health(db, SystemClock(), OFF)
        assert report["database"] == f"{said}: {type(error).__name__}"
        assert report["status"] == "degraded"
