"""Draining buffers (§5.4): the oldest buffered occurrence starts once no run is active.

One occurrence per schedule per tick, in FIFO order of their instants. A buffered occurrence
waits while the namespace is at capacity; it is dropped (as skipped) only by pause or delete.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import format_utc
from app.db import ACTIVE_RUN_STATUSES, Database, Namespace, Run, Schedule, ScheduleOccurrence
from app.db.session import begin_write
from app.schedules.acting import finish_if_exhausted
from app.schedules.firing import due_of, run_id_for
from app.schedules.ledger import Writes, block, spec_of, start_occurrence
from app.schedules.page import ActiveRun, PageContext
from app.schedules.starts import orm_starter

PAGE_SIZE = 100
log = logging.getLogger(__name__)


def drain_buffers(db: Database, now: datetime, *, budget_deadline: float) -> list[dict[str, Any]]:
    """Start one buffered occurrence of every active schedule that has no active run."""
    rows: list[dict[str, Any]] = []
    after = 0
    while time.monotonic() < budget_deadline:
        with db.session() as session:
            begin_write(session)
            running = exists().where(
                Run.schedule_uid == Schedule.uid, Run.status.in_(ACTIVE_RUN_STATUSES)
            )
            schedules = list(
                session.scalars(
                    select(Schedule)
                    .where(
                        Schedule.status == "active",
                        Schedule.buffered_count > 0,
                        Schedule.id > after,
                        ~running,
                    )
                    .order_by(Schedule.id)
                    .limit(PAGE_SIZE)
                    .with_for_update(skip_locked=True)
                )
            )
            if not schedules:
                break
            after = schedules[-1].id
            for schedule in schedules:
                try:
                    # A savepoint per schedule: one failed start leaves the others alone.
                    with session.begin_nested():
                        rows.extend(_drain_one(session, now, schedule))
                except IntegrityError:
                    log.error(
                        "schedule %s: buffered run id already taken; left buffered",
                        schedule.schedule_id,
                    )
            session.commit()
    return rows


def _drain_one(session: Session, now: datetime, schedule: Schedule) -> list[dict[str, Any]]:
    namespace = session.get(Namespace, schedule.namespace_id)
    assert namespace is not None
    ctx = PageContext.load(session, namespace, [schedule])
    context = ctx.context(schedule)
    w = Writes()
    row = {
        "schedule_id": schedule.schedule_id,
        "namespace": namespace.name,
        "occurrence_time": None,
        "run_id": None,
    }
    target = ctx.target(schedule)
    if not ctx.authorized(schedule) or target is None:
        reason = (
            "principal_unauthorized" if not ctx.authorized(schedule) else "activation_not_ready"
        )
        block(w, schedule, now, reason, context)
        w.flush(session)
        return [row | {"outcome": "blocked", "next_fire_at": None}]
    if not ctx.has_room():
        return [row | {"outcome": "refused", "next_fire_at": _text(schedule.next_fire_at)}]
    buffered = session.scalar(
        select(ScheduleOccurrence)
        .where(
            ScheduleOccurrence.schedule_pk == schedule.id,
            ScheduleOccurrence.kind == "buffered",
        )
        .order_by(ScheduleOccurrence.instant, ScheduleOccurrence.id)
        .limit(1)
    )
    if buffered is None:
        schedule.buffered_count = 0
        return []
    occurrence_time = buffered.instant
    if buffered.origin == "scheduled":
        occurrence_time = due_of(
            spec_of(schedule), schedule.uid, schedule.jitter_seconds, buffered.instant
        )
    run_id = start_occurrence(
        w,
        schedule,
        now,
        target,
        orm_starter(session, now, namespace),
        instant=buffered.instant,
        occurrence_time=occurrence_time,
        origin=buffered.origin,
        outcome="drained",
        policy=schedule.overlap_policy,
        context=context,
    )
    assert run_id == run_id_for(schedule.schedule_id, buffered.instant, buffered.origin)
    buffered.kind, buffered.run_id, buffered.observed_at = "started", run_id, now
    schedule.buffered_count -= 1
    ctx.active[schedule.uid].append(ActiveRun(0, run_id, False))
    finish_if_exhausted(ctx, w, schedule, now, context)
    w.flush(session)
    return [
        row
        | {
            "outcome": "drained",
            "occurrence_time": format_utc(occurrence_time),
            "run_id": run_id,
            "next_fire_at": _text(schedule.next_fire_at),
        }
    ]


def _text(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)
