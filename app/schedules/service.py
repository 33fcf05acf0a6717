"""Changing schedules: create, replace (If-Match), merge-patch, pause, resume and delete.

Every function takes the session, the clock's `now`, the namespace, the acting user and its
command context; it raises domain errors and leaves the commit to the caller. A refused request
writes nothing. Each change is a new revision and one audit event.

Pausing or deleting closes the active period: occurrences not yet observed become a skipped
range, buffered ones are dropped as skipped, a capacity-refused one joins a `capacity` range.
Resume rebinds the principal and starts from a fresh future cursor, without catch-up.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.calendar import (
    CalendarError,
    SpecRangeError,
    check_range,
    format_utc,
    format_utc_or_none,
)
from app.db import Namespace, Schedule, User, new_uid
from app.db.session import begin_write
from app.errors import AlmanacError
from app.schedules import store, targets
from app.schedules.audit import CommandContext, event_row
from app.schedules.config import ScheduleConfig, merge_patch, parse_request, spec_error
from app.schedules.errors import (
    RevisionConflict,
    ScheduleDeleted,
    invalid,
)
from app.schedules.ledger import Writes
from app.schedules.transitions import (
    account_until,
    discard_buffer,
    fire_at,
    keep_due,
    mark_deleted,
    nothing_left,
    reschedule,
    resolve_pending,
)


def save(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    data: Mapping[str, Any],
    expected_revision: int | None,
) -> tuple[Schedule, bool]:
    """Create a schedule, or replace one with `If-Match`; returns (schedule, created)."""
    schedule_id, config = parse_request(data)
    if expected_revision is None:
        check_range(config.spec, now)
        return _create(session, now, namespace, actor, context, schedule_id, config, data), True
    if schedule_id is None:
        raise RevisionConflict("If-Match names no schedule: give its 'id'", None)
    existing = store.lock(session, namespace, schedule_id)
    if existing is not None and existing.status == "deleted":
        raise ScheduleDeleted(existing.schedule_id)
    if existing is None:
        raise RevisionConflict(
            f"schedule {schedule_id!r} does not exist; save it without If-Match to create it",
            None,
        )
    store.check_revision(existing, expected_revision)
    if not _keeps_calendar(existing, config):
        check_range(config.spec, now)
    _replace(session, now, namespace, actor, context, existing, config, data)
    return existing, False


def patch(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str,
    data: Mapping[str, Any],
    expected_revision: int | None,
) -> Schedule:
    """Apply a JSON merge patch (shorthands allowed) to the current configuration."""
    schedule = store.lock_for_change(session, namespace, schedule_id, expected_revision)
    for key in ("id", "schedule_id"):
        if key in data and data[key] != schedule_id:
            raise invalid([key], "a schedule's id cannot change")
    current = store.config_of(schedule).to_json()
    merged = merge_patch(current, {k: v for k, v in data.items() if k not in ("id", "schedule_id")})
    try:
        _, config = parse_request(merged)
    except CalendarError as exc:
        # The merged request holds the shorthands expanded: name the field the patch wrote.
        if exc.loc[:1] != ("spec",):
            raise
        raise spec_error(data, CalendarError(exc.msg, exc.loc[1:], exc.code)) from None
    if not _keeps_calendar(schedule, config):
        check_range(config.spec, now)
    _replace(session, now, namespace, actor, context, schedule, config, data)
    return schedule


def _stays_finished(schedule: Schedule, config: ScheduleConfig) -> bool:
    """A schedule whose calendar ran out keeps its calendar: a change of its notes, labels or
    policies is taken, and it stays blocked (`calendar_exhausted`) until its spec changes."""
    return (
        schedule.status == "blocked"
        and schedule.blocked_reason == "calendar_exhausted"
        and "spec" not in config.changed_fields(store.config_of(schedule))
    )


def _keeps_calendar(schedule: Schedule, config: ScheduleConfig) -> bool:
    """A change that leaves the spec alone needs no future occurrence: the schedule keeps its
    calendar and cursor. A finished one stays blocked; one draining the occurrences it buffered
    before its calendar ended goes on draining; a paused one is checked when it is resumed; and
    one the change would unblock with nothing left to fire is blocked `calendar_exhausted`
    instead (`_replace`)."""
    return "spec" not in config.changed_fields(store.config_of(schedule))


def _keeps_target(schedule: Schedule, config: ScheduleConfig, previous: ScheduleConfig) -> bool:
    """A change that leaves the action alone, to a schedule that does not fire from it now
    (paused; or blocked because its target is not ready), needs no ready target: it stays
    paused or blocked, and resuming checks the target (a retired pinned activation still takes
    a change of its notes)."""
    if "action" in config.changed_fields(previous):
        return False
    if schedule.status == "paused":
        return True
    return schedule.status == "blocked" and schedule.blocked_reason == "activation_not_ready"


def _create(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str | None,
    config: ScheduleConfig,
    data: Mapping[str, Any],
) -> Schedule:
    """Insert a new schedule, its first revision and its `ScheduleCreated` event.

    The target is resolved (reads only) before the write begins, so SQLite's write lock is held
    for the inserts alone. A taken id answers as before: 409 for a deleted or existing one,
    even when the request is also invalid.
    """
    try:
        target = targets.resolve(session, namespace, config, data)
    except AlmanacError:
        if schedule_id is not None:
            _refuse_taken(session, namespace, schedule_id)
        raise
    begin_write(session, keep_reads=True)
    schedule = Schedule(
        uid=new_uid(),
        namespace_id=namespace.id,
        schedule_id=schedule_id or f"schedule-{uuid.uuid4().hex[:16]}",
        revision=1,
        status="active",
        principal_id=actor.id,
        workflow_name=target.workflow_name,
        cursor_at=now,
        fires_count=0,
        remaining_runs=config.max_runs,
        skipped_trigger_count=0,
        buffered_count=0,
        # The creation event is the first of the audit stream.
        history_sequence=1,
        created_at=now,
        updated_at=now,
        # Every configuration field is a column of the same name.
        **config.to_json(),
    )
    reschedule(schedule, config.spec)
    event = event_row(0, 1, now, "ScheduleCreated", _saved(schedule, context))
    # Two creates of one id race here; the unique key picks the winner, the loser gets a 409.
    if not store.insert_new(session, schedule, now, event):
        _refuse_taken(session, namespace, schedule.schedule_id)
        raise RevisionConflict(
            f"schedule {schedule.schedule_id!r} was just created by another request", None
        )
    return schedule


def _refuse_taken(session: Session, namespace: Namespace, schedule_id: str) -> None:
    """409 when `schedule_id` names a schedule already: deleted, or changeable with If-Match."""
    existing = store.find(session, namespace, schedule_id)
    if existing is None:
        return
    if existing.status == "deleted":
        raise ScheduleDeleted(schedule_id)
    store.check_revision(existing, None)


def _replace(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule: Schedule,
    config: ScheduleConfig,
    data: Mapping[str, Any],
) -> None:
    previous = store.config_of(schedule)
    try:
        target = targets.resolve(session, namespace, config, data, schedule.action.get("input"))
        workflow_name, target_ready = target.workflow_name, True
    except targets.TargetNotReady:
        if not _keeps_target(schedule, config, previous):
            raise
        workflow_name, target_ready = schedule.workflow_name, False
    changed = config.changed_fields(previous)
    if (
        "max_runs" in changed
        and config.max_runs is not None
        and config.max_runs <= schedule.fires_count
    ):
        raise invalid(
            ["max_runs"],
            f"must be more than the {schedule.fires_count} runs this schedule already started",
        )
    unblock = (
        schedule.status == "blocked" and target_ready and not _stays_finished(schedule, config)
    )
    if not changed and not unblock and schedule.principal_id == actor.id:
        # The same configuration saved again by its principal (an apply re-run, a secret sent
        # again in plaintext, which seals to the same token): a no-op writes nothing.
        return
    w = Writes()
    # A calendar spelled anew (`00` for `0`) that fires alike keeps its cursor and whatever is
    # due but not yet ticked, as any other change that leaves the occurrences alone does.
    new_calendar = "spec" in changed and not config.spec.fires_like(previous.spec)
    fresh_cursor = unblock or (schedule.status == "active" and new_calendar)
    if schedule.status == "active" and new_calendar:
        # The old calendar's period ends now; the new one starts from a fresh future cursor.
        account_until(w, schedule, now, "updated", context)
    if unblock:
        resolve_pending(w, schedule, now, context)
        schedule.status, schedule.blocked_reason = "active", None
        # The audit event says the save unblocked it, beside the fields that did.
        changed = [*changed, "status"]
    # What the tick was to fire next, and when: a change that keeps the cursor keeps it due.
    before = None if fresh_cursor else fire_at(schedule)
    if fresh_cursor:
        schedule.cursor_at = max(schedule.cursor_at or now, now)
    for name, value in config.to_json().items():
        setattr(schedule, name, value)
    if "max_runs" in changed:
        schedule.remaining_runs = (
            None if config.max_runs is None else config.max_runs - schedule.fires_count
        )
    schedule.workflow_name = workflow_name
    schedule.principal_id = actor.id
    if schedule.status == "active":
        reschedule(schedule, store.spec_of(schedule))
        keep_due(schedule, before, now)
        if unblock and nothing_left(schedule):
            # Unblocked with its calendar over and nothing buffered: it has ended instead, as
            # the next tick would say; the event names the reason that changed, not a status.
            schedule.status, schedule.blocked_reason = "blocked", "calendar_exhausted"
            changed = [*(field for field in changed if field != "status"), "blocked_reason"]
    store.next_revision(session, schedule, now, w.revisions)
    payload = {"changed_fields": changed, **_saved(schedule, context)}
    w.event(schedule, now, "ScheduleUpdated", payload)
    w.flush(session)


def _saved(schedule: Schedule, context: CommandContext) -> dict[str, Any]:
    """What `ScheduleCreated` and `ScheduleUpdated` both record about the saved schedule."""
    return {
        "spec": schedule.spec,
        "action": schedule.action,
        "overlap_policy": schedule.overlap_policy,
        "next_fire_at": format_utc_or_none(schedule.next_fire_at),
        "command_context": context.to_json(),
    }


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
    store.next_revision(session, schedule, now, w.revisions)
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
    spec = store.spec_of(schedule)
    targets.check_for_resume(session, namespace, schedule)
    try:
        check_range(spec, max(now, schedule.cursor_at or now))
    except SpecRangeError:
        # A blocked schedule keeps its buffer: resumed, it drains what its calendar gave it.
        if not schedule.buffered_count:
            raise SpecRangeError(
                f"schedule {schedule_id!r} has no future occurrence; save it with a new spec "
                "instead"
            ) from None
    w = Writes()
    resolve_pending(w, schedule, now, context)
    schedule.status, schedule.paused_reason, schedule.blocked_reason = "active", None, None
    schedule.principal_id = actor.id
    schedule.cursor_at = max(schedule.cursor_at or now, now)
    reschedule(schedule, spec)
    store.next_revision(session, schedule, now, w.revisions)
    w.event(
        schedule,
        now,
        "ScheduleResumed",
        {
            "next_fire_at": format_utc_or_none(schedule.next_fire_at),
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
        raise store.missing(schedule_id, expected_revision)
    if schedule.status == "deleted":
        return schedule
    store.check_revision(schedule, expected_revision)
    w = Writes()
    mark_deleted(session, w, schedule, now, "requested", context)
    w.flush(session)
    return schedule
