"""Manual triggers and backfill: idempotent, under the schedule's rules.

Both start runs under the acting user's authority (the caller checks `run.start`; the command
context names the user), apply the overlap policy (backfill treats buffer policies as
`allow_all`) and count against `max_runs`. `plan_backfill` answers what a backfill would do
now (starts, and skips by reason) with the same decisions, for the console's confirmation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from sqlalchemy.orm import Session

from app.calendar import Spec, format_utc, occurrences_between
from app.db import Namespace, Schedule
from app.errors import CapacityExceeded
from app.runs.lifecycle import RunTarget
from app.schedules import store
from app.schedules.audit import CommandContext
from app.schedules.config import OVERLAP_POLICIES
from app.schedules.errors import (
    BackfillTooLarge,
    ScheduleDeleted,
    ScheduleNotFound,
    ScheduleStateConflict,
    invalid,
)
from app.schedules.ledger import Writes, audit_skip
from app.schedules.tick.act import Act, act
from app.schedules.tick.context import FiringContext
from app.schedules.tick.policy import (
    BUFFER_LIMITS,
    exhausted,
    overlap_outcome,
    run_id_for,
    runs_freed,
)
from app.schedules.tick.starts import Firing, orm_starter

MAX_BACKFILL = 1000
_TICK = timedelta(microseconds=1)
KIND_OUTCOMES = {"started": "triggered", "buffered": "buffered", "skipped": "skipped"}


@dataclass(frozen=True)
class BackfillResult:
    results: list[dict[str, Any]]
    started: int
    skipped: int


def trigger(
    session: Session,
    now: datetime,
    namespace: Namespace,
    context: CommandContext,
    schedule_id: str,
    overlap_policy: str | None = None,
) -> Act:
    """Act on an occurrence at `now` (to the millisecond); repeating it answers the same."""
    policy = _policy(overlap_policy)
    schedule, ctx, target = _prepare(session, namespace, schedule_id)
    instant = now.replace(microsecond=now.microsecond // 1000 * 1000)
    earlier = store.find_occurrence(session, schedule, "manual", instant)
    if earlier is not None:
        return Act(KIND_OUTCOMES[earlier.kind], earlier.run_id, earlier.reason)
    w = Writes()
    firing = Firing(instant, instant, "manual", trigger_policy(schedule, policy), "triggered")
    starter = orm_starter(session, now, namespace)
    result = act(ctx, w, starter, schedule, now, target, firing, context)
    if result.outcome == "refused":
        limit = namespace.max_active_runs
        raise CapacityExceeded(
            f"namespace {namespace.name!r} is at its limit of {limit} active runs",
            retry_after=5,
            max_active_runs=limit,
        )
    w.flush(session)
    return result


def trigger_policy(schedule: Schedule, override: str | None) -> str:
    """The overlap policy a trigger applies: the override or the schedule's, except that a
    paused or blocked schedule keeps no buffer (it drains only while active, and resuming
    never catches up), so buffer policies act as `skip` there."""
    policy = override or schedule.overlap_policy
    if schedule.status != "active" and policy in BUFFER_LIMITS:
        return "skip"
    return policy


def backfill(
    session: Session,
    now: datetime,
    namespace: Namespace,
    context: CommandContext,
    schedule_id: str,
    start: datetime,
    end: datetime,
    overlap_policy: str | None = None,
) -> BackfillResult:
    """Start one run per canonical occurrence in [start, end) that has none yet."""
    policy = _policy(overlap_policy)
    if end <= start:
        raise invalid(["to"], "must be after 'from'")
    if end > now:
        raise invalid(["to"], "must not be in the future: the scheduler fires those")
    schedule, ctx, target = _prepare(session, namespace, schedule_id)
    policy = backfill_policy(schedule, policy)
    instants = backfill_instants(store.spec_of(schedule), start, end)
    if len(instants) > MAX_BACKFILL:
        raise BackfillTooLarge(len(instants), MAX_BACKFILL)
    taken = _taken(session, schedule, instants)
    w, starter = Writes(), orm_starter(session, now, namespace)
    results = []
    for instant in instants:
        result = _backfill_one(
            ctx, w, starter, schedule, now, target, instant, policy, context, taken
        )
        results.append(result)
        if _accounted(result) and schedule.cursor_at is not None:
            # The cursor only moves forward past what is accounted: a paused or blocked
            # schedule resumed after its clock went back must not fire these again.
            schedule.cursor_at = max(schedule.cursor_at, instant)
    w.flush(session)
    started = sum(1 for r in results if r["outcome"] == "backfilled")
    return BackfillResult(results, started, sum(1 for r in results if r["outcome"] == "skipped"))


def _accounted(result: dict[str, Any]) -> bool:
    """Whether a backfill's result put its occurrence in the ledger (started, or skipped for a
    reason of its own; `scheduled` ones are the tick's, already started ones were before)."""
    if result["outcome"] == "backfilled":
        return True
    return result["outcome"] == "skipped" and result["reason"] != "scheduled"


def backfill_instants(spec: Spec, start: datetime, end: datetime) -> list[datetime]:
    """Canonical occurrences in [start, end): at most one more than `MAX_BACKFILL`."""
    occurrences = occurrences_between(spec, start - _TICK, end - _TICK)
    return list(islice(occurrences, MAX_BACKFILL + 1))


@dataclass(frozen=True)
class BackfillPlan:
    """What a backfill of a range would do now: the console's count before confirming."""

    policy: str
    occurrences: int
    starts: int = 0
    already_started: int = 0
    skips: dict[str, int] = field(default_factory=dict)
    # Why the backfill would be refused as a whole (409), as `backfill` refuses it.
    refusal: str | None = None

    @property
    def too_large(self) -> bool:
        return self.occurrences > MAX_BACKFILL


def plan_backfill(
    session: Session,
    namespace: Namespace,
    schedule: Schedule,
    start: datetime,
    end: datetime,
    overlap_policy: str | None = None,
) -> BackfillPlan:
    """Walk the range with the decisions `backfill` makes (the tick's overlap, `max_runs` and
    capacity rules), writing nothing: how many runs would start and why the others would not."""
    policy = backfill_policy(schedule, _policy(overlap_policy))
    instants = backfill_instants(store.spec_of(schedule), start, end)
    ctx = FiringContext.load(session, namespace, [schedule])
    # In the order `backfill` checks: the schedule, its target, then the range's size.
    if schedule.status == "deleted":
        return BackfillPlan(policy, len(instants), refusal="the schedule is deleted")
    if ctx.target(schedule) is None:
        return BackfillPlan(
            policy, len(instants), refusal="the schedule has no ready activation to start"
        )
    if len(instants) > MAX_BACKFILL:
        return BackfillPlan(policy, len(instants))
    taken = _taken(session, schedule, instants)
    leased = [run.leased for run in ctx.active[schedule.uid]]
    remaining, starts, skips = schedule.remaining_runs, 0, Counter[str]()
    for instant in instants:
        if instant in taken:
            continue
        if exhausted(remaining):
            skips["max_runs_exhausted"] += 1
            continue
        if _scheduler_owns(schedule, instant):
            skips["scheduled"] += 1
            continue
        decision, reason = overlap_outcome(policy, len(leased), 0)
        freed = runs_freed(policy, leased)
        if decision == "skip" or not ctx.has_room(freed):
            skips[reason or "capacity"] += 1
            continue
        ctx.add_active(1 - freed)
        # Ending others leaves only leased runs that were asked to cancel.
        leased = [held for held in leased if held and policy == "cancel_other"]
        leased.append(False)
        starts += 1
        remaining = None if remaining is None else remaining - 1
    return BackfillPlan(policy, len(instants), starts, len(taken), dict(skips))


def backfill_policy(schedule: Schedule, override: str | None) -> str:
    """The overlap policy a backfill applies: the override or the schedule's, buffer policies
    acting as `allow_all` (a backfill never buffers)."""
    policy = override or schedule.overlap_policy
    return "allow_all" if policy in BUFFER_LIMITS else policy


def _backfill_one(
    ctx: FiringContext,
    w: Writes,
    starter: Any,
    schedule: Schedule,
    now: datetime,
    target: RunTarget,
    instant: datetime,
    policy: str,
    context: CommandContext,
    taken: dict[datetime, str],
) -> dict[str, Any]:
    row: dict[str, Any] = {"occurrence_time": format_utc(instant), "run_id": None, "reason": None}
    if instant in taken:
        return row | {"outcome": "already_started", "run_id": taken[instant]}
    if schedule.status == "deleted":
        return row | {"outcome": "skipped", "reason": "max_runs_exhausted"}
    if _scheduler_owns(schedule, instant):
        return row | {"outcome": "skipped", "reason": "scheduled"}
    firing = Firing(instant, instant, "backfill", policy, "backfilled")
    result = act(ctx, w, starter, schedule, now, target, firing, context)
    if result.outcome == "refused":
        audit_skip(w, schedule, now, "capacity", context)
        return row | {"outcome": "skipped", "reason": "capacity"}
    if result.outcome == "skipped":
        return row | {"outcome": "skipped", "reason": result.reason}
    return row | {"outcome": "backfilled", "run_id": result.run_id}


def _scheduler_owns(schedule: Schedule, instant: datetime) -> bool:
    """Occurrences the ticker has not accounted for yet are its to fire, not backfill's."""
    if schedule.pending_occurrence == instant:
        return True
    cursor = schedule.cursor_at
    return schedule.status == "active" and cursor is not None and instant > cursor


def _taken(session: Session, schedule: Schedule, instants: list[datetime]) -> dict[datetime, str]:
    """Occurrences that already have a run (scheduled or backfilled) or wait in the buffer."""
    if not instants:
        return {}
    ids = {}
    for instant in instants:
        for origin in ("scheduled", "backfill"):
            ids[run_id_for(schedule.schedule_id, instant, origin)] = instant
    found = store.existing_run_ids(session, schedule, ids)
    taken = {ids[run_id]: run_id for run_id in found}
    for instant in store.buffered_instants(session, schedule, instants):
        taken.setdefault(instant, run_id_for(schedule.schedule_id, instant))
    return taken


def _prepare(
    session: Session, namespace: Namespace, schedule_id: str
) -> tuple[Schedule, FiringContext, RunTarget]:
    schedule = store.lock(session, namespace, schedule_id)
    if schedule is None:
        raise ScheduleNotFound(schedule_id)
    if schedule.status == "deleted":
        raise ScheduleDeleted(schedule_id)
    ctx = FiringContext.load(session, namespace, [schedule])
    target = ctx.target(schedule)
    if target is None:
        raise ScheduleStateConflict(
            f"schedule {schedule_id!r} has no ready activation to start",
            reason="activation_not_ready",
        )
    return schedule, ctx, target


def _policy(value: str | None) -> str | None:
    if value is not None and value not in OVERLAP_POLICIES:
        raise invalid(["overlap_policy"], f"must be one of {', '.join(OVERLAP_POLICIES)}")
    return value
