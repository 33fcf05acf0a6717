"""A schedule's state changes, shared by the service and the tick.

`block` stops firing until an authorized save or resume; `account_until` (pause, delete, a new
calendar) turns the occurrences not yet observed into one skipped range; `discard_buffer` drops
the buffer as skipped; `mark_deleted` is the soft delete; `reschedule` sets the next fire time
from the cursor. Each queues its audit event in `Writes`; the caller holds the row lock.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.calendar import Spec, due_time, format_utc
from app.db import Schedule
from app.schedules import store
from app.schedules.audit import CommandContext
from app.schedules.ledger import Writes, count_skipped, record_skip
from app.schedules.tick.policy import Occurrence, Skip, kept_due, next_after, scan_due


def resolve_pending(w: Writes, schedule: Schedule, now: datetime, context: CommandContext) -> None:
    """A refused occurrence that can no longer be retried joins a `capacity` skipped range."""
    if schedule.pending_occurrence is not None:
        instant = schedule.pending_occurrence
        record_skip(w, schedule, now, Skip(instant, instant, 1, "capacity"), context)
        schedule.pending_occurrence = schedule.pending_until = None


def account_until(
    w: Writes, schedule: Schedule, now: datetime, reason: str, context: CommandContext
) -> None:
    """Close the active period at `now`: occurrences not yet observed become one skipped range."""
    resolve_pending(w, schedule, now, context)
    cursor = schedule.cursor_at
    if schedule.status != "active" or cursor is None or now <= cursor:
        return
    spec = store.spec_of(schedule)
    scan = scan_due(spec, schedule.uid, 0, cursor, now)
    if scan.count and scan.first is not None and scan.last is not None:
        skip = Skip(scan.first.instant, scan.last.instant, scan.count, reason)
        record_skip(w, schedule, now, skip, context)
    schedule.cursor_at = now


def discard_buffer(
    session: Session,
    w: Writes,
    schedule: Schedule,
    now: datetime,
    reason: str,
    context: CommandContext,
) -> None:
    """Buffered occurrences that can no longer start become skipped, oldest first."""
    if not schedule.buffered_count:
        return
    rows = store.buffered(session, schedule)
    for row in rows:
        row.kind, row.through, row.reason, row.observed_at = "skipped", row.instant, reason, now
    schedule.buffered_count = 0
    count_skipped(w, schedule, now, len(rows), reason, context)


def reschedule(schedule: Schedule, spec: Spec, upcoming: Occurrence | None | bool = True) -> None:
    """Set `next_occurrence`/`next_fire_at` from the cursor (or the pending occurrence).

    `upcoming` is the next occurrence after the cursor when the caller already knows it.
    """
    assert schedule.cursor_at is not None
    if upcoming is True:
        upcoming = next_after(spec, schedule.uid, schedule.jitter_seconds, schedule.cursor_at)
    assert upcoming is None or isinstance(upcoming, Occurrence)
    schedule.next_occurrence = upcoming.instant if upcoming else None
    schedule.next_fire_at = upcoming.due if upcoming else None
    if schedule.pending_occurrence is not None:
        # The refused occurrence stays due so the next tick retries it.
        schedule.next_fire_at = due_time(
            spec, schedule.uid, schedule.jitter_seconds, schedule.pending_occurrence
        )


def fire_at(schedule: Schedule) -> Occurrence | None:
    """The next occurrence and the time it is due (`next_fire_at`), unless one is pending:
    a change that kept the cursor may have held it later than its jittered time (`keep_due`)."""
    if schedule.pending_occurrence is not None or schedule.next_occurrence is None:
        return None
    if schedule.next_fire_at is None:
        return None
    return Occurrence(schedule.next_occurrence, schedule.next_fire_at)


def keep_due(schedule: Schedule, before: Occurrence | None, now: datetime) -> None:
    """After a change that kept the cursor and rescheduled: the occurrence the tick was to fire
    next (`before`, from `fire_at`) is not made due in the past by a lower jitter, which a tick
    would record as missed; it is due at once instead and fires at the next tick."""
    after = fire_at(schedule)
    if before is not None and after is not None and after.instant == before.instant:
        schedule.next_fire_at = kept_due(after.due, before.due, now)


def nothing_left(schedule: Schedule) -> bool:
    """Its calendar has run out and nothing waits: no occurrence to come, none pending (held
    for capacity), none buffered. An active schedule in this state is blocked
    `calendar_exhausted`: no tick would ever look at it again."""
    return (
        schedule.next_fire_at is None
        and schedule.pending_occurrence is None
        and not schedule.buffered_count
    )


def draining_last(schedule: Schedule) -> bool:
    """Active with its calendar run out, running what it buffered before: it blocks
    `calendar_exhausted` once the buffer is empty."""
    return (
        schedule.status == "active"
        and schedule.next_fire_at is None
        and schedule.pending_occurrence is None
        and bool(schedule.buffered_count)
    )


def block(
    w: Writes, schedule: Schedule, now: datetime, reason: str, context: CommandContext
) -> None:
    """Stop firing until an authorized save or resume; consumes no occurrence. A new revision:
    the schedule's status changed, so a change sent with the revision read before is stale."""
    schedule.status, schedule.blocked_reason = "blocked", reason
    schedule.next_fire_at = None
    store.revise(schedule, now, w.revisions)
    w.event(
        schedule,
        now,
        "ScheduleBlocked",
        {"reason": reason, "blocked_at": format_utc(now), "command_context": context.to_json()},
    )


def mark_deleted(
    session: Session,
    w: Writes,
    schedule: Schedule,
    now: datetime,
    reason: str,
    context: CommandContext,
) -> None:
    """Soft delete: close the period, drop the buffer, keep every row readable."""
    account_until(w, schedule, now, "deleted", context)
    discard_buffer(session, w, schedule, now, "deleted", context)
    schedule.status, schedule.deleted_at = "deleted", now
    schedule.next_fire_at = schedule.next_occurrence = None
    store.revise(schedule, now, w.revisions)
    w.event(
        schedule,
        now,
        "ScheduleDeleted",
        {"reason": reason, "deleted_at": format_utc(now), "command_context": context.to_json()},
    )
