"""The schedules' store: loading for reading or for a change (write transactions, row locks,
revision checks), revision rows, and the ledger reads that changes depend on.

The tick's hot path has its own Core store in `app/schedules/tick/rows.py`; the read models
the API and console show are in `app/schedules/queries.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, exists, select
from sqlalchemy.orm import Session

from app.calendar import Spec
from app.db import (
    ACTIVE_RUN_STATUSES,
    Namespace,
    Run,
    Schedule,
    ScheduleHistoryEvent,
    ScheduleOccurrence,
    ScheduleRevision,
)
from app.db.bulk import insert_each
from app.db.bulk import insert_new as insert_new_row
from app.db.session import begin_write
from app.errors import AlmanacError
from app.schedules.config import ScheduleConfig
from app.schedules.errors import RevisionConflict, ScheduleDeleted, ScheduleNotFound

SCHEDULES = cast(Table, Schedule.__table__)
REVISIONS = cast(Table, ScheduleRevision.__table__)
EVENTS = cast(Table, ScheduleHistoryEvent.__table__)


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
    begin_write(session, keep_reads=True)
    return session.scalar(
        select(Schedule)
        .where(Schedule.namespace_id == namespace.id, Schedule.schedule_id == schedule_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def lock_for_change(
    session: Session, namespace: Namespace, schedule_id: str, expected_revision: int | None
) -> Schedule:
    """Lock an existing, not deleted schedule whose revision is `expected_revision`."""
    schedule = lock(session, namespace, schedule_id)
    if schedule is None:
        raise missing(schedule_id, expected_revision)
    if schedule.status == "deleted":
        raise ScheduleDeleted(schedule_id)
    check_revision(schedule, expected_revision)
    return schedule


def missing(schedule_id: str, expected_revision: int | None) -> AlmanacError:
    """What a change to a schedule that does not exist answers: 404, or 409 with no current
    revision when it named one in If-Match (the revision it expected is not there either)."""
    if expected_revision is None:
        return ScheduleNotFound(schedule_id)
    return RevisionConflict(
        f"schedule {schedule_id!r} does not exist, so it has no revision {expected_revision}",
        None,
    )


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


def spec_of(schedule: Schedule) -> Spec:
    return Spec.from_dict(schedule.spec)


def revision_row(schedule: Schedule, now: datetime) -> dict[str, Any]:
    """The immutable revision row of the schedule's current state.

    The configuration is copied from the columns as stored, not parsed again: a tick blocks a
    schedule whose stored spec no longer validates (`spec_invalid`), and records that too.
    """
    config = {
        "spec": schedule.spec,
        "action": dict(schedule.action),
        "overlap_policy": schedule.overlap_policy,
        "missed_policy": schedule.missed_policy,
        "jitter_seconds": schedule.jitter_seconds,
        "max_runs": schedule.max_runs,
        "labels": dict(schedule.labels or {}),
        "memo": dict(schedule.memo or {}),
        "search_attributes": dict(schedule.search_attributes or {}),
        "notes": schedule.notes,
    } | {
        "schedule_id": schedule.schedule_id,
        "status": schedule.status,
        "paused_reason": schedule.paused_reason,
        "blocked_reason": schedule.blocked_reason,
    }
    return {
        "schedule_pk": schedule.id,
        "revision": schedule.revision,
        "config": config,
        "principal_id": schedule.principal_id,
        "created_at": now,
    }


def add_revision(session: Session, schedule: Schedule, now: datetime) -> None:
    """Write the immutable revision row of the schedule's current state."""
    session.add(ScheduleRevision(**revision_row(schedule, now)))


def insert_new(
    session: Session, schedule: Schedule, now: datetime, created: dict[str, Any]
) -> bool:
    """Insert a new (transient) schedule with its first revision and its `created` audit row;
    False, writing nothing, when its id is taken in the namespace.

    Core, not the ORM's unit of work: saves are a hot path. Two statements on PostgreSQL (the
    schedule, then its revision and event together), three on SQLite.
    """
    if session.new or session.dirty or session.deleted:
        session.flush()
    conn = session.connection()
    row = {
        column.key: getattr(schedule, column.key)
        for column in SCHEDULES.columns
        if column.key != "id"
    }
    pk = insert_new_row(conn, SCHEDULES, row, ("namespace_id", "schedule_id"))
    if pk is None:
        return False
    schedule.id = pk
    revision = revision_row(schedule, now)
    insert_each(conn, [(REVISIONS, [revision]), (EVENTS, [created | {"schedule_pk": pk}])])
    return True


def next_revision(
    session: Session, schedule: Schedule, now: datetime, rows: list[dict[str, Any]] | None = None
) -> None:
    """A change is done: bump the revision and record it (in `rows`, when given, for a bulk
    insert with the change's other rows)."""
    if rows is None:
        schedule.revision += 1
        schedule.updated_at = now
        add_revision(session, schedule, now)
    else:
        revise(schedule, now, rows)


def revise(schedule: Schedule, now: datetime, rows: list[dict[str, Any]]) -> None:
    """Bump the revision and queue its row in `rows` (the tick's blocks and deletes too)."""
    schedule.revision += 1
    schedule.updated_at = now
    rows.append(revision_row(schedule, now))


def buffered(
    session: Session, schedule: Schedule, limit: int | None = None
) -> list[ScheduleOccurrence]:
    """The schedule's buffered occurrences, oldest first (FIFO by instant)."""
    query = (
        select(ScheduleOccurrence)
        .where(
            ScheduleOccurrence.schedule_pk == schedule.id,
            ScheduleOccurrence.kind == "buffered",
        )
        .order_by(ScheduleOccurrence.instant, ScheduleOccurrence.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def lock_drainable(
    session: Session, after: int, limit: int, among: Sequence[int] = ()
) -> list[Schedule]:
    """Lock the next active schedules (by id, after `after`) with a buffer and no active run,
    in the namespaces `among` when given.

    Rows another replica holds are skipped, not waited for.
    """
    running = exists().where(Run.schedule_uid == Schedule.uid, Run.status.in_(ACTIVE_RUN_STATUSES))
    query = (
        select(Schedule)
        .where(
            Schedule.status == "active",
            Schedule.buffered_count > 0,
            Schedule.id > after,
            ~running,
        )
        .order_by(Schedule.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if among:
        query = query.where(Schedule.namespace_id.in_(among))
    return list(session.scalars(query))


def find_occurrence(
    session: Session, schedule: Schedule, origin: str, instant: datetime
) -> ScheduleOccurrence | None:
    """The ledger row of one occurrence of `origin` at `instant` (manual triggers are unique)."""
    return session.scalar(
        select(ScheduleOccurrence).where(
            ScheduleOccurrence.schedule_pk == schedule.id,
            ScheduleOccurrence.origin == origin,
            ScheduleOccurrence.instant == instant,
        )
    )


def existing_run_ids(session: Session, schedule: Schedule, run_ids: Iterable[str]) -> list[str]:
    """Which of `run_ids` already name a run in the schedule's namespace."""
    query = select(Run.run_id).where(
        Run.namespace_id == schedule.namespace_id, Run.run_id.in_(list(run_ids))
    )
    return list(session.scalars(query))


def buffered_instants(
    session: Session, schedule: Schedule, instants: Sequence[datetime]
) -> list[datetime]:
    """Which of `instants` wait in the schedule's buffer."""
    query = select(ScheduleOccurrence.instant).where(
        ScheduleOccurrence.schedule_pk == schedule.id,
        ScheduleOccurrence.kind == "buffered",
        ScheduleOccurrence.instant.in_(instants),
    )
    return list(session.scalars(query))
