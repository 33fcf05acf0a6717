"""Pause, resume and delete (§5.3): each a new revision and one audit event.

Pausing or deleting closes the active period: occurrences not yet observed become a skipped
range, buffered ones are dropped as skipped, a capacity-refused one joins a `capacity` range.
Resume rebinds the principal and starts from a fresh future cursor, without catch-up.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.calendar import SpecRangeError, check_range, format_utc
from app.db import Namespace, Schedule, User
from app.runs import lifecycle
from app.runs.errors import ActivationNotFound, ActivationNotReady
from app.schedules import store
from app.schedules.audit import CommandContext
from app.schedules.errors import ScheduleNotFound, ScheduleStateConflict
from app.schedules.ledger import (
    Writes,
    account_until,
    discard_buffer,
    mark_deleted,
    reschedule,
    resolve_pending,
    spec_of,
)
from app.schedules.service import snapshot


def pause(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str,
    expected_revision: int | None,
    reason: str | None = None,
) -> Schedule:
    """Stop firing until resumed; pausing a paused schedule changes nothing."""
    schedule = store.lock_for_change(session, namespace, schedule_id, expected_revision)
    if schedule.status == "paused":
        return schedule
    w = Writes()
    account_until(w, schedule, now, "paused", context)
    resolve_pending(w, schedule, now, context)
    discard_buffer(session, w, schedule, now, "paused", context)
    schedule.status, schedule.paused_reason, schedule.blocked_reason = "paused", reason, None
    schedule.next_fire_at = schedule.next_occurrence = None
    _bump(session, schedule, now)
    w.event(
        schedule,
        now,
        "SchedulePaused",
        {"reason": reason, "paused_at": format_utc(now), "command_context": context.to_json()},
    )
    w.flush(session)
    return schedule


def resume(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str,
    expected_revision: int | None,
) -> Schedule:
    """Fire again from a fresh future cursor under the acting user's authority."""
    schedule = store.lock_for_change(session, namespace, schedule_id, expected_revision)
    if schedule.status == "active":
        return schedule
    spec = spec_of(schedule)
    _check_target(session, namespace, schedule)
    try:
        check_range(spec, max(now, schedule.cursor_at or now))
    except SpecRangeError:
        raise SpecRangeError(
            f"schedule {schedule_id!r} has no future occurrence; save it with a new spec instead"
        ) from None
    w = Writes()
    resolve_pending(w, schedule, now, context)
    schedule.status, schedule.paused_reason, schedule.blocked_reason = "active", None, None
    schedule.principal_id = actor.id
    schedule.cursor_at = max(schedule.cursor_at or now, now)
    reschedule(schedule, spec)
    _bump(session, schedule, now)
    w.event(
        schedule,
        now,
        "ScheduleResumed",
        {
            "next_fire_at": None
            if schedule.next_fire_at is None
            else format_utc(schedule.next_fire_at),
            "command_context": context.to_json(),
        },
    )
    w.flush(session)
    return schedule


def delete(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str,
    expected_revision: int | None,
) -> Schedule:
    """Soft-delete; a second delete is a no-op whatever its If-Match."""
    schedule = store.lock(session, namespace, schedule_id)
    if schedule is None:
        raise ScheduleNotFound(schedule_id)
    if schedule.status == "deleted":
        return schedule
    store.check_revision(schedule, expected_revision)
    w = Writes()
    mark_deleted(session, w, schedule, now, "requested", context)
    _bump(session, schedule, now)
    w.flush(session)
    return schedule


def _bump(session: Session, schedule: Schedule, now: datetime) -> None:
    schedule.revision += 1
    schedule.updated_at = now
    snapshot(session, schedule, now)


def _check_target(session: Session, namespace: Namespace, schedule: Schedule) -> None:
    action = schedule.action
    try:
        lifecycle.resolve_target(
            session,
            namespace,
            workflow=action.get("workflow"),
            activation_id=action.get("activation_id"),
        )
    except (ActivationNotFound, ActivationNotReady) as exc:
        raise ScheduleStateConflict(
            f"cannot resume: {exc.message}; save the schedule with a ready target",
            reason="activation_not_ready",
        ) from None
