"""Moving a locked run through its steps: entering one, completing it, failing the run.

Every function here expects the run's row to be locked by the caller's write transaction and
records one history event per transition. A run executes sequences of steps (frames): its own
row is the root sequence and each started branch of a parallel step is another. The facts replay
needs are in the events: `step_started` names the step and its type, `step_completed` carries the
output and the next step, `branch_started`/`branch_completed` open and close branches.

While the run is suspended by an incident, a step that finishes still records its result, but
what follows it is held (`RunBranch.held`) until the incident is resolved.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, RunBranch, RunHistoryEvent, Signal
from app.runs.frames import Frame, add_branch, branches_of, frame_at, path_of
from app.runs.layout import Layout, capacity, definition_of, join, layout_for, parent_of
from app.runs.lifecycle import finish_run, leased
from app.runs.waiting import ENTER, record, timeout_due

__all__ = ["complete_step", "definition_of", "enter_step", "fail_run", "layout_for"]

# Held continuations are released timeouts first, then elapsed waits, then other completions.
HOLD_RANK = {"timeout": 0, "wait": 1, "completion": 2}


def enter_step(session: Session, run: Run, frame: Frame, now: datetime) -> None:
    """Begin the step at `frame.step_index`: actions become claimable, the others start waiting."""
    layout = layout_for(session, run)
    step = layout.step(path_of(frame), frame.step_index)
    if step is None:
        _finish_sequence(session, run, frame, layout, now)
        return
    frame.current_step = step["id"]
    frame.attempt = 0
    if step["type"] == "action":
        frame.claimable_at = now
        return
    frame.claimable_at = frame.lease_owner = frame.lease_expires_at = None
    if step["type"] == "parallel":
        payload = {
            "type": "parallel",
            "branches": [branch["id"] for branch in step["branches"]],
            "max_concurrency": capacity(step),
        }
        record(session, run, frame, now, "step_started", payload, step["id"])
        continue_parallel(session, run, frame, step, layout, now)
        return
    buffered = ENTER[step["type"]](session, run, frame, step, now)
    if buffered is not None:
        # Kept from before the step was reached: consumed now, in the order they arrived.
        deliver_signal(session, run, frame, step, buffered, now, timeout_due(step, now))


def _finish_sequence(
    session: Session, run: Run, frame: Frame, layout: Layout, now: datetime
) -> None:
    """The sequence ran its last step: the run completes, or the branch does."""
    if isinstance(frame, Run):
        output = run.step_outputs.get(run.current_step) if run.current_step else None
        run.output = output
        finish_run(session, run, now, "completed", "run_completed", {"output": output})
        return
    frame.completed_at = now
    frame.claimable_at = frame.lease_owner = frame.lease_expires_at = None
    frame.output = run.step_outputs.get(frame.current_step or "")
    payload = {"branch": frame.branch_id, "output": frame.output}
    record(session, run, frame, now, "branch_completed", payload, frame.parallel_id)
    parent = frame_at(session, run, parent_of(frame.path))
    assert parent is not None
    continue_parallel(session, run, parent, layout.nodes[frame.parallel_id].step, layout, now)


def _branch_rows(session: Session, run: Run, parallel_id: str) -> list[RunBranch]:
    rows = [row for row in branches_of(session, run) if row.parallel_id == parallel_id]
    return sorted(rows, key=lambda row: row.position)


def continue_parallel(
    session: Session, run: Run, parent: Frame, step: dict[str, Any], layout: Layout, now: datetime
) -> None:
    """Complete the parallel step when every branch has, else start branches up to capacity.

    Starting a branch can complete it at once (a buffered signal), which re-enters here; the
    loop re-reads the branches each time and stops once the parallel step has moved on.
    """
    index = layout.nodes[step["id"]].index
    while run.status in ACTIVE_RUN_STATUSES and parent.step_index == index:
        rows = _branch_rows(session, run, step["id"])
        done = [row for row in rows if row.completed_at is not None]
        if len(done) == len(step["branches"]):
            output = {row.branch_id: row.output for row in rows}
            complete_step(session, run, parent, now, output)
            return
        blocked = run.cancel_requested_at is not None or run.status == "suspended"
        full = len(rows) - len(done) >= capacity(step) or len(rows) == len(step["branches"])
        if blocked or full:
            return
        _start_branch(session, run, parent, step, len(rows), now)


def _start_branch(
    session: Session, run: Run, parent: Frame, step: dict[str, Any], position: int, now: datetime
) -> None:
    branch = step["branches"][position]
    row = RunBranch(
        run_pk=run.id,
        path=join(path_of(parent), step["id"], branch["id"]),
        parallel_id=step["id"],
        branch_id=branch["id"],
        position=position,
        step_index=0,
        attempt=0,
        started_at=now,
    )
    session.add(row)
    add_branch(session, run, row)
    # The branch is at its first step from now on; an action's own `step_started` comes only
    # with a worker's claim, so replay learns it here.
    payload = {"branch": branch["id"], "position": position, "first_step": branch["steps"][0]["id"]}
    record(session, run, row, now, "branch_started", payload, step["id"])
    enter_step(session, run, row, now)


def deliver_signal(
    session: Session,
    run: Run,
    frame: Frame,
    step: dict[str, Any],
    signal: Signal,
    now: datetime,
    deadline: datetime | None,
) -> None:
    """Let `signal` satisfy the signal step `frame` is at, and move on."""
    signal.status = "consumed"
    signal.node_id = step["id"]
    payload = {
        "signal_id": signal.id,
        "signal": signal.name,
        "payload": signal.payload,
        "accepted_at": format_utc_or_none(signal.accepted_at),
        "deadline": format_utc_or_none(deadline),
    }
    record(session, run, frame, now, "signal_received", payload, step["id"])
    complete_step(session, run, frame, now, signal.payload)


def complete_step(
    session: Session,
    run: Run,
    frame: Frame,
    now: datetime,
    output: Any,
    cause: Deadline | None = None,
) -> None:
    """Store the step's output, then go on to the next step (held while suspended).

    `cause` is the deadline whose elapsing completed the step, if one did: it orders the
    continuation among the others held by an incident.
    """
    layout = layout_for(session, run)
    node_id = frame.current_step
    assert node_id is not None
    following = layout.step(path_of(frame), frame.step_index + 1)
    run.step_outputs = {**run.step_outputs, node_id: output}
    payload: dict[str, Any] = {
        "output": output,
        "next_step": following["id"] if following else None,
    }
    # A cancelled run holds nothing: it ends once no step of it is executing.
    if run.status == "suspended" and run.cancel_requested_at is None:
        payload["held"] = True
        record(session, run, frame, now, "step_completed", payload, node_id)
        hold(run, frame, "advance", cause)
        return
    record(session, run, frame, now, "step_completed", payload, node_id)
    advance(session, run, frame, now)


def hold(run: Run, frame: Frame, kind: str, cause: Deadline | None, **extra: Any) -> None:
    """Park what follows `frame`'s step until the incident barrier lifts."""
    # Only branches can finish a step while the run is suspended: the root sequence is either
    # the failed step itself or a parallel step waiting on its branches.
    assert isinstance(frame, RunBranch)
    reason = "completion"
    if cause is not None:
        reason = "wait" if cause.kind == "wait" else "timeout"
    frame.held = {
        "kind": kind,
        "reason": reason,
        "due": format_utc_or_none(cause.due_at) if cause is not None else None,
        "node_id": frame.current_step,
        "sequence": run.last_sequence,
        **extra,
    }
    frame.claimable_at = None


def held_order(held: dict[str, Any]) -> tuple[int, str, str, int]:
    """Release order of held continuations: the deadline order, then the order recorded."""
    return (HOLD_RANK[held["reason"]], held["due"] or "", held["node_id"] or "", held["sequence"])


def advance(session: Session, run: Run, frame: Frame, now: datetime) -> None:
    """Move `frame` past its current step: stop there if cancelled, else enter the next one."""
    layout = layout_for(session, run)
    frame.step_index += 1
    following = layout.step(path_of(frame), frame.step_index)
    if following is not None:
        frame.current_step = following["id"]
    if run.cancel_requested_at is not None:
        frame.claimable_at = None
        stop_if_cancelled(session, run, now)
        return
    enter_step(session, run, frame, now)


def stop_if_cancelled(session: Session, run: Run, now: datetime) -> None:
    """A cancel was requested: the run ends once no worker is executing any of its steps,
    with the reason and the `command_context` the request gave (its `cancel_requested` event
    holds them)."""
    if run.status in ACTIVE_RUN_STATUSES and not leased(session, run):
        requested = session.scalar(
            select(RunHistoryEvent.payload)
            .where(
                RunHistoryEvent.run_pk == run.id, RunHistoryEvent.event_type == "cancel_requested"
            )
            .order_by(RunHistoryEvent.sequence)
            .limit(1)
        )
        requested = requested or {}
        payload = {
            "reason": requested.get("reason"),
            "requested_at": format_utc_or_none(run.cancel_requested_at),
        }
        if "command_context" in requested:
            payload["command_context"] = requested["command_context"]
        finish_run(session, run, now, "cancelled", "run_cancelled", payload)


def fail_run(
    session: Session, run: Run, now: datetime, error: dict[str, Any], node_id: str | None = None
) -> None:
    """End the run as failed at `node_id` (default: the root's current step)."""
    run.error = error
    finish_run(
        session, run, now, "failed", "run_failed", {"error": error}, node_id or run.current_step
    )
