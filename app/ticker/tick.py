"""One tick: every phase of SPEC §5.4 in order, then a liveness beat for `/health`."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from flask import Flask
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.calendar import format_utc
from app.context import clock as app_clock
from app.context import database, ticker_database
from app.db import Database, TickerBeat
from app.db.clock import ManualClock, SystemClock
from app.db.rls import Scope
from app.db.session import begin_write
from app.ticker import rotation

TICKER_ID = f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class TickResult:
    """What one tick did: schedule rows (SPEC §5.4), deadlines applied and steps run."""

    now: datetime
    rows: list[dict[str, Any]] = field(default_factory=list)
    deadlines: int = 0
    steps: int = 0
    # Namespaces visited (PostgreSQL) and phases that failed, with their cause.
    namespaces: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": format_utc(self.now),
            "rows": self.rows,
            "deadlines": self.deadlines,
            "steps": self.steps,
            "failures": self.failures,
        }


@dataclass
class TickContext:
    """What every phase receives: the database, the tick's `now` and the settings."""

    db: Database
    now: datetime
    config: Mapping[str, Any]
    result: TickResult
    deadline_monotonic: float


Phase = Callable[[TickContext], None]


def phases() -> list[Phase]:
    """The tick's phases in SPEC §5.4 order: buffers, deadlines, schedules, leases."""
    from app.ticker import runs, schedules

    return [
        schedules.drain_buffers,
        runs.process_deadlines,
        schedules.fire_due_schedules,
        runs.recover_leases,
    ]


def workers() -> list[Phase]:
    """Run after the phases on request (`work`): every runnable step until none is left."""
    from app.ticker import runs

    return [runs.work_until_idle]


def run_tick(app: Flask, *, work: bool = False) -> TickResult:
    """Run one tick at the clock's current time and record the beat.

    On PostgreSQL the phases run namespace by namespace in bound transactions (rotation.py);
    on SQLite once over all. Either way a failing phase is logged and the others still run.
    """
    db = ticker_database(app)
    with db.session() as session:
        now = app_clock(app).now(session)
    started = time.monotonic()
    budget = float(app.config["TICK_BUDGET_SECONDS"])
    ctx = TickContext(db, now, app.config, TickResult(now), started + budget)
    if db.is_sqlite:
        for phase in phases():
            rotation.run_guarded(ctx, phase, "")
    else:
        max_pages = app.config.get("TICK_MAX_NAMESPACE_PAGES")
        rotation.run_bound(ctx, phases(), int(max_pages) if max_pages else None)
    if work:
        wctx = replace(ctx, db=database(app).bound(Scope.all()))
        for worker in workers():
            worker(wctx)
    _record_beat(db, now, int((time.monotonic() - started) * 1000))
    return ctx.result


def _record_beat(db: Database, now: datetime, duration_ms: int) -> None:
    with db.session() as session:
        begin_write(session)
        beat = session.get(TickerBeat, TICKER_ID)
        wall = datetime.now(UTC)
        if beat is None:
            session.add(
                TickerBeat(
                    ticker_id=TICKER_ID,
                    last_tick_at=wall,
                    last_tick_clock=now,
                    duration_ms=duration_ms,
                )
            )
        else:
            beat.last_tick_at, beat.last_tick_clock, beat.duration_ms = wall, now, duration_ms
        session.commit()


def health(
    db: Database, clock: SystemClock | ManualClock, config: Mapping[str, Any]
) -> dict[str, Any]:
    """Database reachability, and the newest beat of any ticker with its lag in seconds."""
    report: dict[str, Any] = {
        "status": "ok",
        "database": "ok",
        "clock": "manual" if clock.manual else "system",
    }
    try:
        with db.session() as session:
            session.execute(text("SELECT 1"))
            last = _last_beat(session)
    except Exception as exc:  # noqa: BLE001 - any failure means the database is unreachable
        report.update(status="degraded", database=f"unreachable: {type(exc).__name__}")
        report["ticker"] = {
            "enabled": scheduler_enabled(config),
            "last_tick_at": None,
            "lag_seconds": None,
        }
        return report
    lag = None if last is None else round((datetime.now(UTC) - last).total_seconds(), 3)
    stale = lag is None or lag > max(5.0, 5 * float(config["TICK_SECONDS"]))
    if scheduler_enabled(config) and stale:
        report["status"] = "degraded"
    report["ticker"] = {
        "enabled": scheduler_enabled(config),
        "last_tick_at": format_utc(last) if last else None,
        "lag_seconds": lag,
    }
    return report


def _last_beat(session: Session) -> datetime | None:
    return session.scalar(select(func.max(TickerBeat.last_tick_at)))


def scheduler_enabled(config: Mapping[str, Any]) -> bool:
    return str(config["SCHEDULER"]).lower() in {"on", "1", "true", "yes"}
