"""Acting on one occurrence under an overlap policy: start, buffer, skip, or refuse (capacity).

Shared by the tick, buffer draining, manual triggers and backfill, so every path applies the
same overlap, capacity and `max_runs` rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.db import ACTIVE_RUN_STATUSES, Schedule
from app.runs import lifecycle
from app.runs.lifecycle import RunTarget
from app.schedules.audit import CommandContext
from app.schedules.ledger import Writes, audit_skip, record_buffer, record_skip
from app.schedules.tick.context import ActiveRun, FiringContext
from app.schedules.tick.policy import (
    ENDS_OTHERS,
    Skip,
    ends_now,
    exhausted,
    overlap_outcome,
    runs_freed,
)
from app.schedules.tick.starts import Firing, Starter, start_occurrence
from app.schedules.transitions import mark_deleted


@dataclass(frozen=True)
class Act:
    """What happened to one occurrence: triggered, buffered, skipped or refused (capacity)."""

    outcome: str
    run_id: str | None = None
    reason: str | None = None


def act(
    ctx: FiringContext,
    w: Writes,
    starter: Starter,
    schedule: Schedule,
    now: datetime,
    target: RunTarget,
    firing: Firing,
    context: CommandContext,
) -> Act:
    """Apply the firing's overlap policy to its occurrence and record the result."""
    instant, origin, policy = firing.instant, firing.origin, firing.policy
    active = ctx.active[schedule.uid]
    decision, reason = overlap_outcome(policy, len(active), schedule.buffered_count)
    if decision == "skip":
        assert reason is not None
        if origin == "backfill":
            audit_skip(w, schedule, now, reason, context)
        else:
            record_skip(w, schedule, now, Skip(instant, instant, 1, reason), context, origin)
        return Act("skipped", None, reason)
    if decision == "buffer":
        record_buffer(w, schedule, now, instant, origin)
        return Act("buffered")
    freed = runs_freed(policy, [run.leased for run in active])
    if not ctx.has_room(freed):
        if origin == "scheduled" and policy == "cancel_other" and ctx.has_room(len(active)):
            # Cancel first, then start: the runs asked to cancel free their places at their
            # next step boundary, and the refused occurrence is retried within its grace. (Left
            # alone, they ran on while every later occurrence was refused too.) Only when their
            # places are what it waits for: runs of other schedules holding the namespace are
            # no reason to end these. A trigger or a backfill refused for capacity is not
            # retried, so it asks nothing.
            _end_others(ctx, schedule, now, policy, "has a newer occurrence waiting for its place")
        return Act("refused", None, "capacity")
    _end_others(ctx, schedule, now, policy)
    run_id = start_occurrence(w, schedule, now, target, starter, firing, context)
    w.occurrence(schedule, now, origin=origin, kind="started", instant=instant, run_id=run_id)
    ctx.active[schedule.uid].append(ActiveRun(0, run_id, False))
    ctx.add_active(1 - freed)
    finish_if_exhausted(ctx, w, schedule, now, context)
    return Act("triggered", run_id)


def finish_if_exhausted(
    ctx: FiringContext, w: Writes, schedule: Schedule, now: datetime, context: CommandContext
) -> None:
    """At `remaining_runs == 0` the schedule deletes itself (`max_runs`)."""
    if exhausted(schedule.remaining_runs) and schedule.status != "deleted":
        mark_deleted(ctx.session, w, schedule, now, "max_runs_exhausted", context)


def _end_others(
    ctx: FiringContext,
    schedule: Schedule,
    now: datetime,
    policy: str,
    why: str = "started a newer run",
) -> None:
    if policy not in ENDS_OTHERS:
        return
    still_active = []
    for entry in ctx.active[schedule.uid]:
        run = ctx.run(entry)
        if run is None or run.status not in ACTIVE_RUN_STATUSES:
            continue
        reason = f"schedule {schedule.schedule_id!r} {why} ({policy})"
        by = ctx.context(schedule).with_reason(reason).to_json()
        if policy == "terminate_other":
            lifecycle.terminate_run(ctx.session, run, now, reason, by)
        else:
            lifecycle.request_cancel(ctx.session, run, now, reason, by)
        # A leased run asked to cancel finishes its step first (the simulation decides alike).
        if not ends_now(policy, run.lease_owner is not None):
            still_active.append(entry)
    ctx.active[schedule.uid] = still_active
