"""`/health`'s report: database reachability and the newest ticker beat with its lag."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database, TickerBeat
from app.db.clock import ManualClock, SystemClock


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
        "last_tick_at": format_utc_or_none(last),
        "lag_seconds": lag,
    }
    return report


def scheduler_enabled(config: Mapping[str, Any]) -> bool:
    """Whether processes of this configuration host a ticker (`ALMANAC_SCHEDULER`)."""
    return str(config["SCHEDULER"]).lower() in {"on", "1", "true", "yes"}


def _last_beat(session: Session) -> datetime | None:
    return session.scalar(select(func.max(TickerBeat.last_tick_at)))
