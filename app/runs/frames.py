"""The sequences a run executes: the run row itself (the root) and its started branches.

Both kinds carry the same position and lease columns (`step_index`, `current_step`, `attempt`,
`claimable_at`, `lease_owner`, `lease_expires_at`), so the step machinery treats them alike.
Callers hold the run's row lock; branch rows are only written under it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.runs import Run, RunBranch
from app.runs.layout import ROOT, Layout, branch_path

Frame = Run | RunBranch

WAITING_TYPES = ("wait", "signal", "task")


def path_of(frame: Frame) -> str:
    return frame.path if isinstance(frame, RunBranch) else ROOT


def branch_path_of(frame: Frame) -> list[str]:
    return branch_path(path_of(frame))


def branches_of(session: Session, run: Run) -> list[RunBranch]:
    """Every started branch of the run, in the order they started."""
    query = select(RunBranch).where(RunBranch.run_pk == run.id).order_by(RunBranch.id)
    return list(session.scalars(query))


def frame_at(session: Session, run: Run, path: str) -> Frame | None:
    if path == ROOT:
        return run
    query = select(RunBranch).where(RunBranch.run_pk == run.id, RunBranch.path == path)
    return session.scalar(query)


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
