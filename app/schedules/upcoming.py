"""The namespace's run starts over the next hours, each distinct calendar expanded once.

A herd of schedules usually shares few calendars (100,000 daily schedules have at most 1,440
distinct times of day). Schedules that start exactly at their canonical occurrences from now on
(no jitter, no `max_runs` left to count, cursor not ahead of now) are grouped by spec in the
database and each spec is expanded once, weighted by how many schedules share it. The others
(jittered, limited, cursor ahead) are expanded one by one, up to `EXACT_LIMIT` of them; beyond
that they are counted at their canonical occurrences (jitter moves a start by at most an hour),
and `Upcoming.approximate` says how many were.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice

from sqlalchemy import and_, func, not_, or_, select
from sqlalchemy.orm import Session

from app.calendar import Spec, due_time, occurrences_between
from app.db import Namespace, Schedule
from app.schedules.queries import MAX_STARTS_PER_SCHEDULE, starts_left

EXACT_LIMIT = 2000


@dataclass(frozen=True)
class Upcoming:
    """(due time, schedules starting then) pairs; `approximate` schedules were placed at their
    canonical occurrences without jitter or `max_runs` (beyond `EXACT_LIMIT`)."""

    starts: list[tuple[datetime, int]]
    approximate: int = 0


def upcoming_load(
    session: Session,
    namespace: Namespace,
    now: datetime,
    hours: int = 24,
    exact_limit: int = EXACT_LIMIT,
) -> Upcoming:
    """Due times of every active schedule of the namespace in the next `hours`, weighted."""
    until = now + timedelta(hours=hours)
    active = and_(Schedule.namespace_id == namespace.id, Schedule.status == "active")
    plain = and_(
        Schedule.jitter_seconds == 0,
        Schedule.remaining_runs.is_(None),
        or_(Schedule.cursor_at.is_(None), Schedule.cursor_at <= now),
    )
    starts: list[tuple[datetime, int]] = []
    grouped = select(Schedule.spec, func.count()).group_by(Schedule.spec)
    for raw_spec, count in session.execute(grouped.where(active, plain)):
        spec = Spec.from_dict(raw_spec)
        for instant in islice(occurrences_between(spec, now, until), MAX_STARTS_PER_SCHEDULE):
            starts.append((instant, count))
    one_by_one = session.execute(
        select(
            Schedule.id,
            Schedule.uid,
            Schedule.spec,
            Schedule.jitter_seconds,
            Schedule.cursor_at,
            Schedule.remaining_runs,
        )
        .where(active, not_(plain))
        .order_by(Schedule.id)
        .limit(exact_limit)
    ).all()
    for _pk, uid, raw_spec, jitter, cursor, remaining in one_by_one:
        spec = Spec.from_dict(raw_spec)
        after = max(now, cursor) if cursor else now
        limit = starts_left(remaining, MAX_STARTS_PER_SCHEDULE)
        for instant in islice(occurrences_between(spec, after, until), limit):
            starts.append((due_time(spec, uid, jitter, instant), 1))
    approximate = 0
    if len(one_by_one) == exact_limit:
        beyond = and_(active, not_(plain), Schedule.id > one_by_one[-1][0])
        for raw_spec, count in session.execute(grouped.where(beyond)):
            spec = Spec.from_dict(raw_spec)
            approximate += count
            for instant in islice(occurrences_between(spec, now, until), MAX_STARTS_PER_SCHEDULE):
                starts.append((instant, count))
    return Upcoming(starts, approximate)
