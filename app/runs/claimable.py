"""What workers may claim: the queries for runnable root and branch steps, per queue.

Root steps are claimed from the runs table (`FOR UPDATE SKIP LOCKED` on PostgreSQL). Branch steps
are claimed from `run_branches`, locking their runs (every write to a branch happens under its
run's lock) and re-reading the branches once the locks are held.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, or_, select
from sqlalchemy.orm import Session

from app.db import Database, UTCDateTime
from app.db.runs import Run, RunBranch
from app.runs.claims import ANY_QUEUE, Clock, WorkerSettings
from app.runs.frames import Frame
from app.runs.leases import locked_branches

_CLAIMABLE: dict[tuple[str, str | None, int], Any] = {}
# Only these statuses hand out work: a suspended run starts nothing (the incident barrier).
CLAIMABLE_STATUSES = ("pending", "running")


def _on_queue(query: Select[Any], queue: str | None) -> Select[Any]:
    if queue is None or queue == "default":
        return query.where(or_(Run.queue.is_(None), Run.queue == "default"))
    if queue != ANY_QUEUE:
        return query.where(Run.queue == queue)
    return query


def claimable_runs(queue: str | None, limit: int) -> Any:
    """The claim query over runs' root steps for `queue`, built once (`now` is bound)."""
    if ("runs", queue, limit) not in _CLAIMABLE:
        now = bindparam("now", type_=UTCDateTime())
        query = select(Run).where(
            Run.claimable_at <= now,
            Run.status.in_(CLAIMABLE_STATUSES),
            or_(Run.lease_owner.is_(None), Run.lease_expires_at <= now),
        )
        query = _on_queue(query, queue)
        _CLAIMABLE["runs", queue, limit] = query.order_by(Run.claimable_at, Run.id).limit(limit)
    return _CLAIMABLE["runs", queue, limit]


def claimable_branches(queue: str | None, limit: int) -> Any:
    """The claim query over branch steps: `(branch, run)` rows, oldest claimable first."""
    if ("branches", queue, limit) not in _CLAIMABLE:
        now = bindparam("now", type_=UTCDateTime())
        query = (
            select(RunBranch, Run)
            .join(Run, Run.id == RunBranch.run_pk)
            .where(
                RunBranch.claimable_at <= now,
                Run.status.in_(CLAIMABLE_STATUSES),
                or_(RunBranch.lease_owner.is_(None), RunBranch.lease_expires_at <= now),
            )
        )
        query = _on_queue(query, queue).order_by(RunBranch.claimable_at, RunBranch.id)
        _CLAIMABLE["branches", queue, limit] = query.limit(limit)
    return _CLAIMABLE["branches", queue, limit]


def anything_claimable(db: Database, clock: Clock, settings: WorkerSettings) -> bool:
    with db.session() as session:
        now = clock.now(session)
        query = claimable_runs(settings.queue, 1).with_only_columns(Run.id)
        if session.scalar(query, {"now": now}) is not None:
            return True
        branches = claimable_branches(settings.queue, 1).with_only_columns(RunBranch.id)
        return session.scalar(branches, {"now": now}) is not None


def lock_claimable_branches(
    session: Session, settings: WorkerSettings, now: datetime
) -> list[tuple[RunBranch, Run]]:
    """Claimable branch steps with their runs locked, re-read once the locks are held.

    The query locks only the runs (`SKIP LOCKED`), and its branch columns come from the
    statement's snapshot: a worker that committed on the run just before the lock was taken may
    have leased or finished the branch since. Reading the branches again under the lock (a new
    snapshot on PostgreSQL) sees that, so a step is never leased twice.
    """
    query = locked_branches(session, claimable_branches(settings.queue, settings.batch))
    rows = [(row[0], row[1]) for row in session.execute(query, {"now": now})]
    if rows and session.get_bind().dialect.name != "sqlite":
        again = select(RunBranch).where(RunBranch.id.in_([branch.id for branch, _ in rows]))
        session.scalars(again.execution_options(populate_existing=True)).all()
    return [(branch, run) for branch, run in rows if claimable_now(branch, now)]


def claimable_now(frame: Frame, now: datetime) -> bool:
    if frame.claimable_at is None or frame.claimable_at > now:
        return False
    return frame.lease_owner is None or (
        frame.lease_expires_at is not None and frame.lease_expires_at <= now
    )
