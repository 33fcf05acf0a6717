"""Writing a schedule's decisions: ledger rows (§5.6), audit events (§5.7), counters, status.

Rows are collected in `Writes` and inserted in bulk when the transaction's work is done, so the
tick can write a whole page of firings with a handful of statements (Core on the hot path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from app.calendar import Spec, format_utc
from app.db import Schedule, ScheduleHistoryEvent, ScheduleOccurrence
from app.runs.lifecycle import RunTarget
from app.schedules.audit import CommandContext, check_origin, event_row
from app.schedules.bulk import insert_rows
from app.schedules.firing import Occurrence, Skip, due_of, next_after, run_id_for, scan_due

OCCURRENCES = cast(Table, ScheduleOccurrence.__table__)
EVENTS = cast(Table, ScheduleHistoryEvent.__table__)


@dataclass
class RunStart:
    """Everything needed to start one run for a schedule (see app/schedules/starts.py)."""

    run_id: str
    target: RunTarget
    run_input: Any
    origin: dict[str, Any]
    timeout_seconds: int | None
    schedule: Schedule


Starter = Callable[[RunStart], str]


@dataclass
class Writes:
    """Ledger and audit rows of one transaction, inserted together by `flush`."""

    occurrences: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def event(
        self,
        schedule: Schedule,
        now: datetime,
        event_type: str,
        payload: dict[str, Any],
        run_id: str | None = None,
        run_uid: str | None = None,
    ) -> None:
        """Queue the schedule's next audit event; the caller holds the schedule's row lock."""
        schedule.history_sequence += 1
        self.events.append(
            event_row(
                schedule.id, schedule.history_sequence, now, event_type, payload, run_id, run_uid
            )
        )

    def occurrence(
        self,
        schedule: Schedule,
        now: datetime,
        *,
        origin: str,
        kind: str,
        instant: datetime,
        through: datetime | None = None,
        count: int = 1,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self.occurrences.append(
            {
                "schedule_pk": schedule.id,
                "origin": origin,
                "kind": kind,
                "instant": instant,
                "through": through,
                "count": count,
                "reason": reason,
                "run_id": run_id,
                "revision": schedule.revision,
                "observed_at": now,
            }
        )

    def flush(self, session: Session) -> None:
        session.flush()
        conn = session.connection()
        insert_rows(conn, OCCURRENCES, self.occurrences)
        insert_rows(conn, EVENTS, self.events)
        self.occurrences, self.events = [], []


def spec_of(schedule: Schedule) -> Spec:
    return Spec.from_dict(schedule.spec)


def record_skip(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    skip: Skip,
    context: CommandContext,
    origin: str = "scheduled",
) -> None:
    """A skipped range: one ledger row, the skip counters, one `ScheduleTriggerSkipped`."""
    w.occurrence(
        schedule,
        now,
        origin=origin,
        kind="skipped",
        instant=skip.first,
        through=skip.last,
        count=skip.count,
        reason=skip.reason,
    )
    schedule.skipped_trigger_count += skip.count
    schedule.last_skip_reason = skip.reason
    schedule.last_skipped_at = now
    w.event(
        schedule,
        now,
        "ScheduleTriggerSkipped",
        {
            "reason": skip.reason,
            "skipped_trigger_count": schedule.skipped_trigger_count,
            "last_skipped_at": format_utc(now),
            "command_context": context.to_json(),
        },
    )


def record_buffer(
    w: Writes, schedule: Schedule, now: datetime, instant: datetime, origin: str = "scheduled"
) -> None:
    w.occurrence(schedule, now, origin=origin, kind="buffered", instant=instant)
    schedule.buffered_count += 1


def start_occurrence(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    target: RunTarget,
    starter: Starter,
    *,
    instant: datetime,
    occurrence_time: datetime,
    origin: str,
    outcome: str,
    policy: str,
    context: CommandContext,
) -> str:
    """Start the run of one occurrence and record it; returns the run id."""
    run_id = run_id_for(schedule.schedule_id, instant, origin)
    trigger_number = schedule.fires_count + 1
    spec = schedule.spec
    payload = {
        "schedule_id": schedule.schedule_id,
        "schedule_uid": schedule.uid,
        "cron_expression": (spec.get("cron_expressions") or [None])[0],
        "timezone": spec.get("timezone", "UTC"),
        "overlap_policy": policy,
        "trigger_number": trigger_number,
        "occurrence_time": format_utc(occurrence_time),
    }
    check_origin(payload)
    action = schedule.action
    limits = [
        s for s in (action.get("execution_timeout_seconds"), action.get("run_timeout_seconds")) if s
    ]
    run_uid = starter(
        RunStart(
            run_id,
            target,
            action.get("input", {}),
            payload,
            min(limits) if limits else None,
            schedule,
        )
    )
    schedule.fires_count = trigger_number
    schedule.last_fired_at = now
    schedule.latest_run_id = run_id
    if schedule.remaining_runs is not None:
        schedule.remaining_runs -= 1
    w.event(
        schedule,
        now,
        "ScheduleTriggered",
        {
            "workflow_instance_id": run_id,
            "workflow_run_id": run_uid,
            "outcome": outcome,
            "effective_overlap_policy": policy,
            "trigger_number": trigger_number,
            "occurrence_time": format_utc(occurrence_time),
            "command_context": context.to_json(),
        },
        run_id,
        run_uid,
    )
    return run_id


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
    spec = spec_of(schedule)
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
    rows = session.scalars(
        select(ScheduleOccurrence)
        .where(
            ScheduleOccurrence.schedule_pk == schedule.id,
            ScheduleOccurrence.kind == "buffered",
        )
        .order_by(ScheduleOccurrence.instant, ScheduleOccurrence.id)
    ).all()
    for row in rows:
        row.kind, row.through, row.reason, row.observed_at = "skipped", row.instant, reason, now
    schedule.buffered_count = 0
    schedule.skipped_trigger_count += len(rows)
    schedule.last_skip_reason, schedule.last_skipped_at = reason, now
    w.event(
        schedule,
        now,
        "ScheduleTriggerSkipped",
        {
            "reason": reason,
            "skipped_trigger_count": schedule.skipped_trigger_count,
            "last_skipped_at": format_utc(now),
            "command_context": context.to_json(),
        },
    )


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
        schedule.next_fire_at = due_of(
            spec, schedule.uid, schedule.jitter_seconds, schedule.pending_occurrence
        )


def block(
    w: Writes, schedule: Schedule, now: datetime, reason: str, context: CommandContext
) -> None:
    """Stop firing until an authorized save or resume; consumes no occurrence (§5.3)."""
    schedule.status, schedule.blocked_reason = "blocked", reason
    schedule.next_fire_at = None
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
    w.event(
        schedule,
        now,
        "ScheduleDeleted",
        {"reason": reason, "deleted_at": format_utc(now), "command_context": context.to_json()},
    )
