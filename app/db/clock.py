"""The one abstraction for "now": system UTC by default, a manual clock for tests and demos."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.system import ClockState


class Clock(Protocol):
    manual: bool

    def now(self, session: Session) -> datetime: ...


class SystemClock:
    """Wall-clock UTC."""

    manual = False

    def now(self, session: Session) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """An instant kept in the database so every process shares it (docs/api.md)."""

    manual = True

    def now(self, session: Session) -> datetime:
        current = session.scalar(select(ClockState.now).where(ClockState.id == 1))
        return current if current is not None else datetime.now(UTC).replace(microsecond=0)

    def set(self, session: Session, instant: datetime) -> datetime:
        """Move the clock (forward or backward) to `instant`; the caller commits."""
        state = session.get(ClockState, 1)
        if state is None:
            session.add(ClockState(id=1, now=instant))
        else:
            state.now = instant
        return instant


def make_clock(kind: str, testing: bool) -> SystemClock | ManualClock:
    """Build the configured clock; the manual one is refused outside testing."""
    if kind == "system":
        return SystemClock()
    if kind == "manual":
        if not testing:
            raise RuntimeError("ALMANAC_CLOCK=manual is refused unless ALMANAC_TESTING=1")
        return ManualClock()
    raise RuntimeError(f"ALMANAC_CLOCK must be 'system' or 'manual', not {kind!r}")
