"""Process-wide state kept in the database: the manual clock and ticker liveness."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime


class ClockState(Base):
    """The manual clock's current instant (docs/api.md); one row, id 1, shared by every process."""

    __tablename__ = "clock_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    now: Mapped[datetime] = mapped_column(UTCDateTime())


class TickerBeat(Base):
    """The last tick each ticker process completed, for `/health`."""

    __tablename__ = "ticker_beats"

    ticker_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    last_tick_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_tick_clock: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)


class SchedulerCursor(Base):
    """Where the scheduler's rotation over namespaces stopped, so it resumes after a restart.

    Written only by the due-work discovery function on PostgreSQL (docs/postgres.md).
    """

    __tablename__ = "scheduler_cursors"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    last_namespace_id: Mapped[int] = mapped_column(Integer, default=0)
