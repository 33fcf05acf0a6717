"""Entering the steps that wait: a wait's deadline, a signal's timeout, a human task.

Each function records the step's events and durable timers; none moves the run on (a buffered
signal that satisfies a signal step is handed back to the caller to deliver).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db.base import new_sortable_uid, new_uid
from app.db.runs import Deadline, Run, Signal, Task
from app.runs.definitions import wait_duration
from app.runs.frames import Frame, branch_path_of
from app.runs.lifecycle import append_event


def record(
    session: Session,
    run: Run,
    frame: Frame,
    now: datetime,
    event_type: str,
    payload: dict[str, Any] | None,
    node_id: str | None,
) -> None:
    """Append an event that happened in `frame` (so it carries the frame's branch path)."""
    append_event(session, run, now, event_type, payload, node_id, branch_path_of(frame))


def timeout_due(step: dict[str, Any], now: datetime) -> datetime | None:
    seconds = step.get("timeout_seconds")
    return now + timedelta(seconds=seconds) if seconds else None


def enter_wait(
    session: Session, run: Run, frame: Frame, step: dict[str, Any], now: datetime
) -> Signal | None:
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
    record(session, run, frame, now, "step_started", {"type": "wait"}, step["id"])
    payload = {
        "wait_id": deadline.wait_id,
        "duration": step["duration"],
        "deadline": format_utc_or_none(due),
    }
    record(session, run, frame, now, "wait_started", payload, step["id"])
    return None


def enter_signal(
    session: Session, run: Run, frame: Frame, step: dict[str, Any], now: datetime
) -> Signal | None:
    """Start waiting for the signal; a signal kept from earlier is returned to be consumed."""
    due = timeout_due(step, now)
    payload = {"type": "signal", "signal": step["signal"], "deadline": format_utc_or_none(due)}
    record(session, run, frame, now, "step_started", payload, step["id"])
    buffered = session.scalar(
        select(Signal)
        .where(Signal.run_pk == run.id, Signal.name == step["signal"], Signal.status == "buffered")
        .order_by(Signal.position)
        .limit(1)
    )
    if buffered is None and due is not None:
        session.add(
            Deadline(run_pk=run.id, kind="signal", node_id=step["id"], due_at=due, created_at=now)
        )
    return buffered


def enter_task(
    session: Session, run: Run, frame: Frame, step: dict[str, Any], now: datetime
) -> Signal | None:
    due = timeout_due(step, now)
    task = Task(
        id=new_sortable_uid(),
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
    record(session, run, frame, now, "step_started", {"type": "task"}, step["id"])
    payload = {
        "task_id": task.id,
        "title": task.title,
        "role": task.role,
        "deadline": format_utc_or_none(due),
    }
    record(session, run, frame, now, "task_created", payload, step["id"])
    return None


Enter = Callable[[Session, Run, Frame, dict[str, Any], datetime], Signal | None]
ENTER: dict[str, Enter] = {"wait": enter_wait, "signal": enter_signal, "task": enter_task}
