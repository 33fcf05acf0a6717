"""Draining buffers: a schedule's oldest buffered occurrence starts once no run of it is active.

One occurrence per schedule per tick, in FIFO order of their instants. A buffered occurrence
waits while the namespace is at capacity; it is dropped (as skipped) only by pause or delete.
A schedule whose calendar ran out stays active until its buffer is empty, then blocks
(`calendar_exhausted`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import due_time, format_utc, format_utc_or_none
from app.db import Database, Namespace, Schedule
from app.db.session import begin_write
from app.schedules import store
from app.schedules.audit import CommandContext
from app.schedules.ledger import Writes
from app.schedules.tick.act import finish_if_exhausted
from app.schedules.tick.context import ActiveRun, FiringContext
from app.schedules.tick.policy import may_drain, run_id_for
from app.schedules.tick.starts import Firing, orm_starter, start_occurrence
from app.schedules.transitions import block, nothing_left

PAGE_SIZE = 100
log = logging.getLogger(__name__)


def drain(db: Database, now: datetime, *, budget_deadline: float) -> list[dict[str, Any]]:
    """Start one buffered occurrence of every active schedule that has no active run."""
    rows: list[dict[str, Any]] = []
    after = 0
    while time.monotonic() < budget_deadline:
        with db.session() as session:
            begin_write(session)
            # The namespace the tick bound this phase to, by name too: a login that bypasses
            # row security (a superuser) would otherwise drain every namespace in each turn.
            schedules = store.lock_drainable(session, after, PAGE_SIZE, db.scope.ids)
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
    ctx = FiringContext.load(session, namespace, [schedule])
    context = ctx.context(schedule)
    w = Writes()
    row = {
        "schedule_id": schedule.schedule_id,
        "namespace": namespace.name,
        "occurrence_time": None,
        "run_id": None,
    }
    reason = ctx.blocked_reason(schedule)
    if reason is not None:
        block(w, schedule, now, reason, context)
        w.flush(session)
        return [row | {"outcome": "blocked", "next_fire_at": None}]
    target = ctx.target(schedule)
    assert target is not None
    if not may_drain(len(ctx.active[schedule.uid]), schedule.buffered_count):
        return []
    oldest = store.buffered(session, schedule, limit=1)
    if not oldest:
        schedule.buffered_count = 0
        blocked = _block_if_finished(w, schedule, now, context, row)
        w.flush(session)
        return blocked
    buffered = oldest[0]
    occurrence_time = buffered.instant
    if buffered.origin == "scheduled":
        occurrence_time = due_time(
            store.spec_of(schedule), schedule.uid, schedule.jitter_seconds, buffered.instant
        )
    if not ctx.has_room():
        # The occurrence that would drain waits for room in the namespace: the row names it.
        return [
            row
            | {
                "outcome": "refused",
                "occurrence_time": format_utc(occurrence_time),
                "next_fire_at": format_utc_or_none(schedule.next_fire_at),
            }
        ]
    firing = Firing(
        buffered.instant, occurrence_time, buffered.origin, schedule.overlap_policy, "drained"
    )
    starter = orm_starter(session, now, namespace)
    run_id = start_occurrence(w, schedule, now, target, starter, firing, context)
    assert run_id == run_id_for(schedule.schedule_id, buffered.instant, buffered.origin)
    buffered.kind, buffered.run_id, buffered.observed_at = "started", run_id, now
    schedule.buffered_count -= 1
    ctx.active[schedule.uid].append(ActiveRun(0, run_id, False))
    finish_if_exhausted(ctx, w, schedule, now, context)
    drained = row | {
        "outcome": "drained",
        "occurrence_time": format_utc(occurrence_time),
        "run_id": run_id,
        "next_fire_at": format_utc_or_none(schedule.next_fire_at),
    }
    blocked = _block_if_finished(w, schedule, now, context, row)
    w.flush(session)
    return [drained, *blocked]


def _block_if_finished(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    context: CommandContext,
    row: dict[str, Any],
) -> list[dict[str, Any]]:
    """Block a schedule whose calendar ran out once its last buffered occurrence has left
    the buffer: the tick that found the calendar over left it active for them."""
    if schedule.status != "active" or not nothing_left(schedule):
        return []
    block(w, schedule, now, "calendar_exhausted", context)
    return [row | {"outcome": "blocked", "next_fire_at": None}]
