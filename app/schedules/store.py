"""Loading schedules for reading or for a change: write transactions, row locks, revisions."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.calendar import Spec
from app.db import Namespace, Schedule
from app.db.session import begin_write
from app.schedules.config import ScheduleConfig
from app.schedules.errors import RevisionConflict, ScheduleDeleted, ScheduleNotFound


def find(session: Session, namespace: Namespace, schedule_id: str) -> Schedule | None:
    return session.scalar(
        select(Schedule).where(
            Schedule.namespace_id == namespace.id, Schedule.schedule_id == schedule_id
        )
    )


def get(session: Session, namespace: Namespace, schedule_id: str) -> Schedule:
    """The schedule (deleted ones included), or 404."""
    schedule = find(session, namespace, schedule_id)
    if schedule is None:
        raise ScheduleNotFound(schedule_id)
    return schedule


def lock(session: Session, namespace: Namespace, schedule_id: str) -> Schedule | None:
    """Begin a write and lock the schedule's row (FOR UPDATE on PostgreSQL), freshly loaded."""
    begin_write(session)
    return session.scalar(
        select(Schedule)
        .where(Schedule.namespace_id == namespace.id, Schedule.schedule_id == schedule_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def lock_for_change(
    session: Session, namespace: Namespace, schedule_id: str, expected_revision: int | None
) -> Schedule:
    """Lock an existing, not deleted schedule whose revision is `expected_revision` (§5.2)."""
    schedule = lock(session, namespace, schedule_id)
    if schedule is None:
        raise ScheduleNotFound(schedule_id)
    if schedule.status == "deleted":
        raise ScheduleDeleted(schedule_id)
    check_revision(schedule, expected_revision)
    return schedule


def check_revision(schedule: Schedule, expected_revision: int | None) -> None:
    if expected_revision is None:
        raise RevisionConflict(
            f"changing schedule {schedule.schedule_id!r} needs If-Match with its revision "
            f"({schedule.revision})",
            schedule.revision,
        )
    if expected_revision != schedule.revision:
        raise RevisionConflict(
            f"schedule {schedule.schedule_id!r} is at revision {schedule.revision}, not "
            f"{expected_revision}; read it again and reconsider the change",
            schedule.revision,
        )


def config_of(schedule: Schedule) -> ScheduleConfig:
    """The schedule's current configuration, as its last revision fixed it."""
    return ScheduleConfig(
        spec=Spec.from_dict(schedule.spec),
        action=dict(schedule.action),
        overlap_policy=schedule.overlap_policy,
        missed_policy=schedule.missed_policy,
        jitter_seconds=schedule.jitter_seconds,
        max_runs=schedule.max_runs,
        labels=dict(schedule.labels or {}),
        memo=dict(schedule.memo or {}),
        search_attributes=dict(schedule.search_attributes or {}),
        notes=schedule.notes,
    )
