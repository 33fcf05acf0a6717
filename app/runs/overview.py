"""What the console's overview and schedules list ask of runs: runs per hour by outcome, each
schedule's latest runs, open tasks and incidents, and steps no worker has taken."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.db import ACTIVE_RUN_STATUSES, Namespace, Run, RunIncident, RunRollup, Task, Workflow
from app.db.rollup import ACTIVE
from app.db.runs import RunBranch
from app.runs.claimable import CLAIMABLE_STATUSES

# Run statuses grouped into the outcomes an operator scans for, in stacking order.
OUTCOMES: dict[str, tuple[str, ...]] = {
    "completed": ("completed",),
    "failed": ("failed", "timed_out"),
    "stopped": ("cancelled", "terminated"),
    "in progress": ACTIVE_RUN_STATUSES,
}
OUTCOME_OF = {status: outcome for outcome, group in OUTCOMES.items() for status in group}
HOURS = 24


@dataclass(frozen=True)
class HourCounts:
    """Runs created in the hour starting at `start`, per outcome."""

    start: datetime
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class RecentRun:
    run_id: str
    status: str
    created_at: datetime


def window_start(now: datetime, hours: int = HOURS) -> datetime:
    """The first hour shown: whole UTC hours, the current one last."""
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)


def runs_per_hour(
    session: Session, namespace: Namespace, now: datetime, hours: int = HOURS
) -> list[HourCounts]:
    """Runs created from `window_start(now)` on, per UTC hour and outcome.

    Read from the rollup kept as runs are created and end (app/db/rollup.py): at most
    `hours` × states × stripes rows, whatever the number of runs.
    """
    start = window_start(now, hours)
    rows = session.execute(
        select(RunRollup.hour, RunRollup.state, func.sum(RunRollup.runs))
        .where(
            RunRollup.namespace_id == namespace.id,
            RunRollup.hour >= start,
            RunRollup.hour <= now,
        )
        .group_by(RunRollup.hour, RunRollup.state)
    )
    found: defaultdict[datetime, dict[str, int]] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    for hour, state, runs in rows:
        outcome = "in progress" if state == ACTIVE else OUTCOME_OF.get(state)
        if outcome is not None:
            found[hour][outcome] += int(runs or 0)
    return [
        HourCounts(begin, dict(found[begin]))
        for begin in (start + timedelta(hours=index) for index in range(hours))
    ]


def latest_runs(
    session: Session, schedule_uids: Sequence[str], per_schedule: int = 10
) -> dict[str, list[RecentRun]]:
    """Each schedule's newest `per_schedule` runs, oldest first, in one statement for a page."""
    if not schedule_uids:
        return {}
    rank = (
        func.row_number().over(partition_by=Run.schedule_uid, order_by=Run.id.desc()).label("rank")
    )
    ranked = (
        select(Run.schedule_uid, Run.run_id, Run.status, Run.created_at, Run.id, rank)
        .where(Run.schedule_uid.in_(list(schedule_uids)))
        .subquery()
    )
    rows = session.execute(
        select(ranked.c.schedule_uid, ranked.c.run_id, ranked.c.status, ranked.c.created_at)
        .where(ranked.c.rank <= per_schedule)
        .order_by(ranked.c.schedule_uid, ranked.c.id)
    )
    found: defaultdict[str, list[RecentRun]] = defaultdict(list)
    for uid, run_id, status, created_at in rows:
        found[uid].append(RecentRun(run_id, status, created_at))
    return dict(found)


def open_task_count(session: Session, namespace: Namespace) -> int:
    """Open human tasks, as `GET /tasks?status=open` lists them."""
    query = select(func.count()).where(Task.namespace_id == namespace.id, Task.status == "open")
    return session.scalar(query.select_from(Task)) or 0


def open_incident_count(session: Session, namespace: Namespace) -> int:
    """Open incidents of the namespace, as `GET /incidents?status=open` lists them."""
    query = select(func.count()).where(
        RunIncident.namespace_id == namespace.id, RunIncident.resolved_at.is_(None)
    )
    return session.scalar(query.select_from(RunIncident)) or 0


def has_workflows(session: Session, namespace: Namespace) -> bool:
    """Whether anything was deployed yet (the overview teaches the first steps until then)."""
    query = select(Workflow.id).where(Workflow.namespace_id == namespace.id).limit(1)
    return session.scalar(query) is not None


# A step ready this long that no worker has taken means no worker serves its queue, or none
# runs at all (a burst of thousands of starts is taken within seconds).
WORKER_WAIT = timedelta(minutes=1)


@dataclass(frozen=True)
class WaitingSteps:
    """Steps ready for a worker since before `now - WORKER_WAIT`: how many, the oldest ready
    time, and how many on each queue (most waiting first)."""

    count: int = 0
    oldest: datetime | None = None
    queues: tuple[tuple[str, int], ...] = ()


def waiting_for_workers(session: Session, namespace: Namespace, now: datetime) -> WaitingSteps:
    """The namespace's steps (a run's, or a parallel branch's) a worker could have claimed for
    over `WORKER_WAIT`: ready, not held by a live lease, their run still claimable."""
    before = now - WORKER_WAIT
    queue = func.coalesce(Run.queue, "default")
    per_queue: defaultdict[str, int] = defaultdict(int)
    oldest: list[datetime] = []
    for frame in (Run, RunBranch):
        query = select(queue, func.count(), func.min(frame.claimable_at)).where(
            Run.namespace_id == namespace.id,
            Run.status.in_(CLAIMABLE_STATUSES),
            frame.claimable_at <= before,
            or_(frame.lease_owner.is_(None), frame.lease_expires_at <= now),
        )
        if frame is RunBranch:
            query = query.select_from(RunBranch).join(Run, Run.id == RunBranch.run_pk)
        for name, count, first in session.execute(query.group_by(queue)):
            per_queue[name] += count
            oldest.append(first)
    if not per_queue:
        return WaitingSteps()
    queues = tuple(sorted(per_queue.items(), key=lambda item: (-item[1], item[0])))
    return WaitingSteps(sum(per_queue.values()), min(oldest), queues)
