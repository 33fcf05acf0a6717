"""Read-only forecasts: how many runs a backfill would start, when runs will start next."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.calendar import Spec, due_time, occurrences_between
from app.db import Namespace, Schedule

MAX_BACKFILL = 1000
_TICK = timedelta(microseconds=1)
# A schedule firing every second would add 86,400 points a day; the chart needs no more.
MAX_STARTS_PER_SCHEDULE = 2000


def backfill_size(schedule: Schedule, start: datetime, end: datetime) -> int | None:
    """Canonical occurrences in [start, end), or None when over the backfill limit."""
    spec = Spec.from_dict(schedule.spec)
    instants = list(islice(occurrences_between(spec, start - _TICK, end - _TICK), MAX_BACKFILL + 1))
    return None if len(instants) > MAX_BACKFILL else len(instants)


def upcoming_starts(
    session: Session, namespace: Namespace, now: datetime, hours: int = 24
) -> list[datetime]:
    """Jittered due times of every active schedule of the namespace in the next `hours`."""
    until = now + timedelta(hours=hours)
    rows = session.execute(
        select(Schedule.uid, Schedule.spec, Schedule.jitter_seconds, Schedule.cursor_at).where(
            Schedule.namespace_id == namespace.id, Schedule.status == "active"
        )
    )
    starts: list[datetime] = []
    for uid, raw_spec, jitter, cursor in rows:
        spec = Spec.from_dict(raw_spec)
        after = max(now, cursor) if cursor else now
        for instant in islice(occurrences_between(spec, after, until), MAX_STARTS_PER_SCHEDULE):
            starts.append(due_time(spec, uid, jitter, instant) if jitter else instant)
    return starts
