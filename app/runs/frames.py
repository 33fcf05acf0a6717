"""The sequences a run executes: the run row itself (the root) and its started branches.

Both kinds carry the same position and lease columns (`step_index`, `current_step`, `attempt`,
`claimable_at`, `lease_owner`, `lease_expires_at`), so the step machinery treats them alike.
Callers hold the run's row lock; branch rows are only written under it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, event, select
from sqlalchemy.orm import Session

from app.db.runs import Run, RunBranch
from app.runs.layout import ROOT, Layout, branch_path

Frame = Run | RunBranch

WAITING_TYPES = ("wait", "signal", "task")


def path_of(frame: Frame) -> str:
    return frame.path if isinstance(frame, RunBranch) else ROOT


def branch_path_of(frame: Frame) -> list[str]:
    return branch_path(path_of(frame))


_CACHE = "almanac_run_branches"
# Built once: this runs for every transition of a parallel run.
_BRANCHES_OF_RUN = (
    select(RunBranch).where(RunBranch.run_pk == bindparam("run_pk")).order_by(RunBranch.id)
)


@event.listens_for(Session, "after_transaction_end")
def _forget_branches(session: Session, transaction: Any) -> None:
    if transaction.parent is None:
        session.info.pop(_CACHE, None)


def branches_of(session: Session, run: Run) -> list[RunBranch]:
    """Every started branch of the run, in the order they started, as this transaction sees them.

    Loaded once per transaction (the caller holds the run's lock, so no one else writes them),
    without a flush: a transition reads branches many times, and flushing each time would write
    its events one by one. Branches started since are added by `add_branch`.
    """
    cache: dict[int, list[RunBranch]] = session.info.setdefault(_CACHE, {})
    if run.id not in cache:
        with session.no_autoflush:
            rows = list(session.scalars(_BRANCHES_OF_RUN, {"run_pk": run.id}))
        rows += [o for o in session.new if isinstance(o, RunBranch) and o.run_pk == run.id]
        cache[run.id] = rows
    return list(cache[run.id])


def add_branch(session: Session, run: Run, branch: RunBranch) -> None:
    """Start tracking a new branch row (added to the session by the caller)."""
    rows = branches_of(session, run)
    if branch not in rows:
        session.info[_CACHE][run.id] = [*rows, branch]


def frame_at(session: Session, run: Run, path: str) -> Frame | None:
    if path == ROOT:
        return run
    return next((row for row in branches_of(session, run) if row.path == path), None)


def frame_of_node(session: Session, run: Run, layout: Layout, node_id: str | None) -> Frame | None:
    """The sequence holding step `node_id`, if it has started."""
    node = layout.nodes.get(node_id or "")
    return frame_at(session, run, node.path) if node is not None else None


def is_runnable(frame: Frame) -> bool:
    return frame.claimable_at is not None or frame.lease_owner is not None


def is_waiting_at(frame: Frame, node_id: str, step: dict[str, Any]) -> bool:
    """Whether `frame` is parked at the wait, signal or task step `node_id`."""
    if isinstance(frame, RunBranch) and (frame.completed_at is not None or frame.held):
        return False
    return (
        frame.current_step == node_id and step["type"] in WAITING_TYPES and not is_runnable(frame)
    )


def settle(session: Session, run: Run, layout: Layout) -> None:
    """Derive an active run's status from all its sequences.

    `suspended` stays until its incidents are resolved; otherwise the run is `running` when any
    sequence has a step to run or running, else `waiting` (a parallel step waits on its branches).
    """
    if run.status not in ("running", "waiting", "pending"):
        return
    if run.status == "pending" and run.started_at is None:
        return
    if is_runnable(run):
        run.status = "running"
        return
    if layout.has_parallel:
        active = [b for b in branches_of(session, run) if b.completed_at is None]
        if any(is_runnable(branch) for branch in active):
            run.status = "running"
            return
    run.status = "waiting"
