"""Acting on one occurrence under an overlap policy (§5.4): start, buffer, skip, or refuse.

Shared by the tick, buffer draining, manual triggers and backfill, so every path applies the
same overlap, capacity and `max_runs` rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from app.db import ACTIVE_RUN_STATUSES, Run, Schedule
from app.runs import lifecycle
from app.runs.lifecycle import RunTarget
from app.schedules.audit import CommandContext
from app.schedules.firing import Skip, overlap_outcome
from app.schedules.ledger import (
    Starter,
    Writes,
    mark_deleted,
    record_buffer,
    record_skip,
    start_occurrence,
)
from app.schedules.page import ActiveRun, PageContext


@dataclass(frozen=True)
class Act:
    """What happened to one occurrence: triggered, buffered, skipped or refused (capacity)."""

    outcome: str
    run_id: str | None = None
    reason: str | None = None


def act(
    ctx: PageContext,
    w: Writes,
    starter: Starter,
    schedule: Schedule,
    now: datetime,
    target: RunTarget,
    *,
    instant: datetime,
    occurrence_time: datetime,
    origin: str,
    policy: str,
    outcome: str,
    context: CommandContext,
) -> Act:
    """Apply `policy` to the occurrence at canonical `instant` and record the result."""
    active = ctx.active[schedule.uid]
    decision, reason = overlap_outcome(policy, len(active), schedule.buffered_count)
    if decision == "skip":
        assert reason is not None
        record_skip(w, schedule, now, Skip(instant, instant, 1, reason), context, origin)
        return Act("skipped", None, reason)
    if decision == "buffer":
        record_buffer(w, schedule, now, instant, origin)
        return Act("buffered")
    freed = _freed(policy, active)
    if not ctx.has_room(freed):
        return Act("refused", None, "capacity")
    _end_others(ctx, schedule, now, policy)
    run_id = start_occurrence(
        w,
        schedule,
        now,
        target,
        starter,
        instant=instant,
        occurrence_time=occurrence_time,
        origin=origin,
        outcome=outcome,
        policy=policy,
        context=context,
    )
    w.occurrence(schedule, now, origin=origin, kind="started", instant=instant, run_id=run_id)
    ctx.active[schedule.uid].append(ActiveRun(0, run_id, False))
    ctx.add_active(1 - freed)
    finish_if_exhausted(ctx, w, schedule, now, context)
    return Act("triggered", run_id)


def finish_if_exhausted(
    ctx: PageContext, w: Writes, schedule: Schedule, now: datetime, context: CommandContext
) -> None:
    """At `remaining_runs == 0` the schedule deletes itself (§5.4 `max_runs`)."""
    if (
        schedule.remaining_runs is not None
        and schedule.remaining_runs <= 0
        and schedule.status != "deleted"
    ):
        mark_deleted(ctx.session, w, schedule, now, "max_runs_exhausted", context)


def _freed(policy: str, active: list[ActiveRun]) -> int:
    # Runs ended now free their place in the namespace; a leased run cancels at its next step.
    if policy == "terminate_other":
        return len(active)
    if policy == "cancel_other":
        return sum(1 for run in active if not run.leased)
    return 0


def _end_others(ctx: PageContext, schedule: Schedule, now: datetime, policy: str) -> None:
    if policy not in ("cancel_other", "terminate_other"):
        return
    still_active = []
    for entry in ctx.active[schedule.uid]:
        run = ctx.session.scalar(
            select(Run).where(Run.namespace_id == schedule.namespace_id, Run.run_id == entry.run_id)
        )
        if run is None or run.status not in ACTIVE_RUN_STATUSES:
            continue
        reason = f"schedule {schedule.schedule_id!r} started a newer run ({policy})"
        if policy == "terminate_other":
            lifecycle.terminate_run(ctx.session, run, now, reason)
        else:
            lifecycle.request_cancel(ctx.session, run, now, reason)
            if run.status in ACTIVE_RUN_STATUSES:
                still_active.append(entry)
    ctx.active[schedule.uid] = still_active
