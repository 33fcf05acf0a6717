"""The one abstraction for "now": the system clock by default, a manual clock for tests and demos.

On PostgreSQL the system clock is the database's (`clock_timestamp()`): every process, on any
machine, agrees on what is due even when their own clocks disagree (docs/postgres.md). SQLite
lives on one machine and keeps the process clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.db import rls
from app.db.system import ClockState


class Clock(Protocol):
    manual: bool

    def now(self, session: Session) -> datetime: ...

    def current(self, session: Session) -> datetime: ...


class SystemClock:
    """Wall-clock UTC: the database's on PostgreSQL, the process's (plus `offset`) elsewhere.

    `offset` shifts the process clock; tests use it to play processes whose clocks are skewed.
    """

    manual = False

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset = offset

    def now(self, session: Session) -> datetime:
        """The time the session's transaction began (read in the same round trip as its
        namespaces, app.db.rls), or the process's clock on SQLite."""
        began = rls.began_at(session)
        return self.current(session) if began is None else began.astimezone(UTC)

    def current(self, session: Session) -> datetime:
        """The time right now (a round trip on PostgreSQL)."""
        if session.get_bind().dialect.name == "postgresql":
            value: Any = session.scalar(text("SELECT clock_timestamp()"))
            return value.astimezone(UTC)  # type: ignore[no-any-return]
        return process_now(self.offset.total_seconds())


class ManualClock:
    """An instant kept in the database so every process shares it (docs/api.md)."""

    manual = True

    def now(self, session: Session) -> datetime:
        current = session.scalar(select(ClockState.now).where(ClockState.id == 1))
        return current if current is not None else datetime.now(UTC).replace(microsecond=0)

    def current(self, session: Session) -> datetime:
        return self.now(session)

    def set(self, session: Session, instant: datetime) -> datetime:
        """Move the clock (forward or backward) to `instant`; the caller commits."""
        state = session.get(ClockState, 1)
        if state is None:
            session.add(ClockState(id=1, now=instant))
        else:
            state.now = instant
        return instant


def process_now(offset_seconds: float = 0) -> datetime:
    """This process's own clock, skewed by the test-only offset (`ALMANAC_CLOCK_OFFSET_SECONDS`)."""
    return datetime.now(UTC) + timedelta(seconds=offset_seconds)


def wall_now(session: Session, config: Mapping[str, Any]) -> datetime:
    """Real time, whatever a manual clock says, for ticker beats and their age: the system
    clock's, so the database's on PostgreSQL (beats written by processes whose clocks disagree
    are read on one clock) and this process's on SQLite, which lives on one machine."""
    return SystemClock(timedelta(seconds=clock_offset(config))).current(session)


def clock_offset(config: Mapping[str, Any]) -> float:
    """The test-only skew of this process's own clock in seconds (ALMANAC_CLOCK_OFFSET_SECONDS)."""
    return float(config.get("CLOCK_OFFSET_SECONDS") or 0)


def clock_from(config: Mapping[str, Any]) -> SystemClock | ManualClock:
    """The clock a configuration names (clocks are stateless: the manual one lives in the
    database)."""
    return make_clock(str(config["CLOCK"]), bool(config["TESTING"]), clock_offset(config))


def make_clock(kind: str, testing: bool, offset_seconds: float = 0) -> SystemClock | ManualClock:
    """Build the configured clock; the manual one and a skew are refused outside testing."""
    if offset_seconds and not testing:
        raise RuntimeError("ALMANAC_CLOCK_OFFSET_SECONDS is refused unless ALMANAC_TESTING=1")
    if kind == "system":
        return SystemClock(timedelta(seconds=offset_seconds))
    if kind == "manual":
        if not testing:
            raise RuntimeError("ALMANAC_CLOCK=manual is refused unless ALMANAC_TESTING=1")
        return ManualClock()
    raise RuntimeError(f"ALMANAC_CLOCK must be 'system' or 'manual', not {kind!r}")
