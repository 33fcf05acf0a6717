"""Moving a locked run through its steps: entering one, completing it, failing the run.

Every function here expects the run's row to be locked by the caller's write transaction and
records one history event per transition (SPEC §6.2). The facts replay needs are in the events:
`step_started` names the step and its type, `step_completed` carries the output and the next step.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db.base import new_uid
from app.db.runs import Deadline, Run, Signal, Task, WorkflowVersion
from app.runs.definitions import step_at, wait_duration
from app.runs.lifecycle import append_event, finish_run

# Waiting steps: the run has no work for a worker until a signal, a task or a deadline moves it.
WAITING_TYPES = ("wait", "signal", "task")

# Versions are immutable, so their definitions are cached per engine (one database each).
_DEFINITIONS: WeakKeyDictionary[Engine, dict[int, dict[str, Any]]] = WeakKeyDictionary()


def definition_of(session: Session, run: Run) -> dict[str, Any]:
    """The run's workflow definition (immutable once deployed)."""
    cache = _DEFINITIONS.setdefault(session.get_bind().engine, {})
    definition = cache.get(run.workflow_version_id)
    if definition is None:
        version = session.get(WorkflowVersion, run.workflow_version_id)
        assert version is not None
        definition = cache.setdefault(run.workflow_version_id, version.definition)
    return definition


def enter_step(session: Session, run: Run, definition: dict[str, Any], now: datetime) -> None:
    """Begin the step at `run.step_index`: actions become claimable, the others start waiting."""
    step = step_at(definition, run.step_index)
    if step is None:
        output = run.step_outputs.get(run.current_step) if run.current_step else None
        run.output = output
        finish_run(session, run, now, "completed", "run_completed", {"output": output})
        return
    run.current_step = step["id"]
    run.attempt = 0
    if step["type"] == "action":
        run.status = "running"
        run.claimable_at = now
        return
    run.status = "waiting"
    run.claimable_at = None
    run.lease_owner = None
    run.lease_expires_at = None
    ENTER[step["type"]](session, run, step, now)


def _enter_wait(session: Session, run: Run, step: dict[str, Any], now: datetime) -> None:
    due = now + wait_duration(step)
    deadline = Deadline(
        run_pk=run.id,
        kind="wait",
        node_id=step["id"],
        due_at=due,
        created_at=now,
        wait_id=new_uid(),
    )
    session.add(deadline)
    append_event(session, run, now, "step_started", {"type": "wait"}, step["id"])
    append_event(
        session,
        run,
        now,
        "wait_started",
        {
            "wait_id": deadline.wait_id,
            "duration": step["duration"],
            "deadline": format_utc_or_none(due),
        },
        step["id"],
    )


def _timeout_due(step: dict[str, Any], now: datetime) -> datetime | None:
    seconds = step.get("timeout_seconds")
    return now + timedelta(seconds=seconds) if seconds else None


def _enter_signal(session: Session, run: Run, step: dict[str, Any], now: datetime) -> None:
    due = _timeout_due(step, now)
    append_event(
        session,
        run,
        now,
        "step_started",
        {"type": "signal", "signal": step["signal"], "deadline": format_utc_or_none(due)},
        step["id"],
    )
    buffered = session.scalar(
        select(Signal)
        .where(Signal.run_pk == run.id, Signal.name == step["signal"], Signal.status == "buffered")
        .order_by(Signal.position)
        .limit(1)
    )
    if buffered is not None:
        # Kept from before the step was reached: consumed now, in the order they arrived.
        deliver_signal(session, run, step, buffered, now, due)
        return
    if due is not None:
        session.add(
            Deadline(run_pk=run.id, kind="signal", node_id=step["id"], due_at=due, created_at=now)
        )


def _enter_task(session: Session, run: Run, step: dict[str, Any], now: datetime) -> None:
    due = _timeout_due(step, now)
    task = Task(
        id=new_uid(),
        run_pk=run.id,
        namespace_id=run.namespace_id,
        node_id=step["id"],
        title=step["title"],
        role=step.get("role"),
        status="open",
        created_at=now,
        due_at=due,
    )
    session.add(task)
    if due is not None:
        session.add(
            Deadline(run_pk=run.id, kind="task", node_id=step["id"], due_at=due, created_at=now)
        )
    append_event(session, run, now, "step_started", {"type": "task"}, step["id"])
    append_event(
        session,
        run,
        now,
        "task_created",
        {
            "task_id": task.id,
            "title": task.title,
            "role": task.role,
            "deadline": format_utc_or_none(due),
        },
        step["id"],
    )


ENTER = {"wait": _enter_wait, "signal": _enter_signal, "task": _enter_task}


def deliver_signal(
    session: Session,
    run: Run,
    step: dict[str, Any],
    signal: Signal,
    now: datetime,
    deadline: datetime | None,
) -> None:
    """Let `signal` satisfy the signal step the run is at, and move on."""
    signal.status = "consumed"
    signal.node_id = step["id"]
    append_event(
        session,
        run,
        now,
        "signal_received",
        {
            "signal_id": signal.id,
            "signal": signal.name,
            "payload": signal.payload,
            "accepted_at": format_utc_or_none(signal.accepted_at),
            "deadline": format_utc_or_none(deadline),
        },
        step["id"],
    )
    complete_step(session, run, now, signal.payload)


def complete_step(session: Session, run: Run, now: datetime, output: Any) -> None:
    """Store the current step's output, then stop (if cancelled) or enter the next step."""
    definition = definition_of(session, run)
    node_id = run.current_step
    assert node_id is not None
    following = step_at(definition, run.step_index + 1)
    run.step_outputs = {**run.step_outputs, node_id: output}
    append_event(
        session,
        run,
        now,
        "step_completed",
        {"output": output, "next_step": following["id"] if following else None},
        node_id,
    )
    run.step_index += 1
    if following is not None:
        run.current_step = following["id"]
    if run.cancel_requested_at is not None:
        finish_run(
            session,
            run,
            now,
            "cancelled",
            "run_cancelled",
            {
                "reason": "cancel requested",
                "requested_at": format_utc_or_none(run.cancel_requested_at),
            },
        )
        return
    enter_step(session, run, definition, now)


def fail_run(session: Session, run: Run, now: datetime, error: dict[str, Any]) -> None:
    """End the run as failed at its current step."""
    run.error = error
    finish_run(session, run, now, "failed", "run_failed", {"error": error}, run.current_step)
