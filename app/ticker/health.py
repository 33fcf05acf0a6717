"""`/health`'s report: database reachability and the newest ticker beat with its lag."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database, TickerBeat
from app.db.clock import ManualClock, SystemClock, wall_now
from app.db.session import is_refusal


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
            # Every request reads the caller's token and user: a login that may not (its grants
            # revoked after start) answers every request with an error: no healthy database.
            session.execute(text("SELECT 1 FROM api_tokens, users WHERE 1 = 0"))
            last = _last_beat(session)
            # The beats' clock (the database's on PostgreSQL), not this process's own.
            current = wall_now(session, config)
    except Exception as exc:  # noqa: BLE001 - any failure means the database cannot be used
        # It answered but refused (a login without its grants, a schema not migrated), or it
        # did not answer at all: the operator's next step differs.
        # SQLite's "no such table" is an OperationalError, but a refusal all the same.
        refused = isinstance(exc, ProgrammingError) or is_refusal(exc)
        state = "refused" if refused else "unreachable"
        report.update(status="degraded", database=f"{state}: {type(exc).__name__}")
        report["ticker"] = {
            "enabled": scheduler_enabled(config),
            "last_tick_at": None,
            "lag_seconds": None,
        }
        return report
    lag = None if last is None else round((current - last).total_seconds(), 3)
    stale = lag is None or lag > max(5.0, 5 * float(config["TICK_SECONDS"]))
    # A process that hosts no ticker still reports a dead one (the tickers are `scheduler run`
    # processes elsewhere): once any ticker has beaten, silence means none is alive. On the
    # manual clock ticks come only when asked for, so silence says nothing there.
    watched = scheduler_enabled(config) or (last is not None and not clock.manual)
    if watched and stale:
        report["status"] = "degraded"
    report["ticker"] = {
        "enabled": scheduler_enabled(config),
        "last_tick_at": format_utc_or_none(last),
        "lag_seconds": lag,
    }
    return report


def scheduler_enabled(config: Mapping[str, Any]) -> bool:
    """Whether processes of this configuration host a ticker (`ALMANAC_SCHEDULER`)."""
    return str(config["SCHEDULER"]).lower() in {"on", "1", "true", "yes"}


def _last_beat(session: Session) -> datetime | None:
    return session.scalar(select(func.max(TickerBeat.last_tick_at)))


# The console warns when no ticker has ticked for this many tick periods.
STALE_PERIODS = 3


@dataclass(frozen=True)
class TickerState:
    """The newest beat of any ticker, how long ago it was (wall clock), and whether that is late."""

    last_tick_at: datetime | None
    last_tick_clock: datetime | None
    lag_seconds: float | None
    period_seconds: float

    @property
    def stale(self) -> bool:
        """No ticker has ticked for `STALE_PERIODS` periods (or ever)."""
        return self.lag_seconds is None or self.lag_seconds > STALE_PERIODS * self.period_seconds


def ticker_state(session: Session, wall_now: datetime, period_seconds: float) -> TickerState:
    """The newest beat as `/health` reads it: `wall_now` is real time, as the beats are."""
    row = session.execute(
        select(TickerBeat.last_tick_at, TickerBeat.last_tick_clock)
        .order_by(TickerBeat.last_tick_at.desc())
        .limit(1)
    ).first()
    if row is None:
        return TickerState(None, None, None, period_seconds)
    lag = round((wall_now - row[0]).total_seconds(), 3)
    return TickerState(row[0], row[1], lag, period_seconds)
