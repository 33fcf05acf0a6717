"""What the namespace overview asks of schedules: counts by status, the blocked, overdue and
held ones.

Every figure here is also what the API's list answers (`GET /schedules?status=…`, and an active
schedule's `next_fire_at`), so the overview and the API agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, literal_column, select
from sqlalchemy.orm import Session

from app.db import SCHEDULE_STATUSES, Namespace, Schedule

NAMED = 10


@dataclass(frozen=True)
class ScheduleHealth:
    """Counts per status, and the first few blocked, overdue and held schedules by name."""

    counts: dict[str, int]
    blocked: list[Schedule]
    overdue: list[Schedule]
    overdue_count: int
    overdue_after: datetime
    # Active schedules whose due occurrence the namespace's run limit refused: the ticker
    # decided it (and retries it within its grace), so they are not overdue.
    held: list[Schedule]
    held_count: int

    @property
    def total(self) -> int:
        """Schedules that are not deleted."""
        return sum(n for status, n in self.counts.items() if status != "deleted")


def schedule_health(
    session: Session, namespace: Namespace, now: datetime, grace: timedelta
) -> ScheduleHealth:
    """Counts by status; blocked schedules; active ones due more than `grace` before `now`."""
    rows = session.execute(
        select(Schedule.status, func.count())
        .where(Schedule.namespace_id == namespace.id)
        .group_by(Schedule.status)
    )
    counts = dict.fromkeys(SCHEDULE_STATUSES, 0) | {status: n for status, n in rows}
    is_blocked = Schedule.status == "blocked"
    if session.get_bind().dialect.name == "sqlite":
        # SQLite's statistics only say how many schedules share a status on average: when all
        # are active it would scan every schedule rather than read the (empty) blocked range.
        is_blocked = func.likelihood(is_blocked, literal_column("0.001"))
    blocked = list(
        session.scalars(
            select(Schedule)
            .where(Schedule.namespace_id == namespace.id, is_blocked)
            .order_by(Schedule.updated_at.desc(), Schedule.id.desc())
            .limit(NAMED)
        )
    )
    cutoff = now - grace
    active = (Schedule.namespace_id == namespace.id) & (Schedule.status == "active")
    late = active & (Schedule.next_fire_at < cutoff) & Schedule.pending_occurrence.is_(None)
    overdue, overdue_count = _named(session, late)
    held, held_count = _named(session, active & Schedule.pending_occurrence.is_not(None))
    return ScheduleHealth(counts, blocked, overdue, overdue_count, cutoff, held, held_count)


def _named(session: Session, where: Any) -> tuple[list[Schedule], int]:
    """The first `NAMED` schedules matching `where` (earliest due first), and how many match."""
    named = list(
        session.scalars(
            select(Schedule).where(where).order_by(Schedule.next_fire_at, Schedule.id).limit(NAMED)
        )
    )
    if len(named) < NAMED:
        return named, len(named)
    return named, session.scalar(select(func.count()).select_from(Schedule).where(where)) or 0
