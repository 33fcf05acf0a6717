"""The deadline scanner, called by every tick.

Due deadlines (`due_at <= now`: nothing wakes early) are applied in this order: run timeouts
first, then signal and task timeouts, then elapsed waits by due time and node id. A run that timed
out applies nothing else: `finish_run` consumes its other deadlines, which are then skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, Task
from app.runs.errors import RunTimedOut
from app.runs.frames import Frame, frame_of_node, is_waiting_at, settle
from app.runs.lifecycle import finish_run
from app.runs.locking import begin_write
from app.runs.steps import complete_step, fail_run, hold, layout_for
from app.runs.waiting import record

PAGE_SIZE = 200
ORDER = case({"run_timeout": 0, "signal": 1, "task": 1}, value=Deadline.kind, else_=2)


@dataclass
class ScanResult:
    applied: int = 0
    pages: int = 0


def due_page(session: Session, now: datetime, limit: int = PAGE_SIZE) -> list[tuple[Deadline, Run]]:
    """The next due, unconsumed deadlines in deadline order, with their runs locked.

    On PostgreSQL the runs are locked `FOR UPDATE SKIP LOCKED` (a run a worker is committing is
    left for the next tick); SQLite holds the database write lock for the whole page.
    """
    query = (
        select(Deadline, Run)
        .join(Run, Run.id == Deadline.run_pk)
        .where(Deadline.consumed_at.is_(None), Deadline.due_at <= now)
        .order_by(ORDER, Deadline.due_at, Deadline.node_id, Deadline.id)
        .limit(limit)
    )
    if session.get_bind().dialect.name != "sqlite":
        query = query.with_for_update(of=Run, skip_locked=True)
    return [(row[0], row[1]) for row in session.execute(query)]


def scan(db: Database, now: datetime, *, budget_left: Any = None) -> ScanResult:
    """Apply every deadline due at `now`, a page per transaction, until none is left."""
    result = ScanResult()
    while budget_left is None or budget_left():
        with db.session() as session:
            begin_write(session)
            page = due_page(session, now)
            for deadline, run in page:
                if apply(session, deadline, run, now):
                    result.applied += 1
            session.commit()
        result.pages += 1
        if len(page) < PAGE_SIZE:
            break
    return result


def overdue_run_timeouts(
    session: Session, run_pks: Iterable[int], now: datetime
) -> dict[int, Deadline]:
    """The run timeouts due at `now` that no scan has applied yet, by run.

    A run's timeout beats whatever else reaches the run after it (a signal, a task's completion,
    an action's result), whether or not the scanner has observed it yet: the outcome must not
    depend on how late the ticker runs.
    """
    pks = list(run_pks)
    if not pks:
        return {}
    query = select(Deadline).where(
        Deadline.run_pk.in_(pks),
        Deadline.kind == "run_timeout",
        Deadline.consumed_at.is_(None),
        Deadline.due_at <= now,
    )
    return {deadline.run_pk: deadline for deadline in session.scalars(query)}


def refuse_after_run_timeout(session: Session, run: Run, now: datetime) -> None:
    """409 (the run is finished: timed out) when the run's timeout is due at `now`; nothing is
    written, and the scanner applies the timeout with its own observation time."""
    overdue = overdue_run_timeouts(session, [run.id], now).get(run.id)
    if overdue is not None:
        raise RunTimedOut(run.run_id, overdue.due_at)


def apply(session: Session, deadline: Deadline, run: Run, now: datetime) -> bool:
    """Apply one due deadline to its (locked) run; False if it no longer applies.

    Consumed exactly once: a deadline observed while the run is suspended records its event now
    (with the issued deadline and the observation time) and holds what follows.
    """
    if deadline.consumed_at is not None:
        return False
    deadline.consumed_at = now
    if run.status not in ACTIVE_RUN_STATUSES:
        return False
    if deadline.kind == "run_timeout":
        payload = {
            "deadline": format_utc_or_none(deadline.due_at),
            "observed_at": format_utc_or_none(now),
        }
        finish_run(session, run, now, "timed_out", "run_timed_out", payload)
        return True
    layout = layout_for(session, run)
    frame = frame_of_node(session, run, layout, deadline.node_id)
    node = layout.nodes.get(deadline.node_id or "")
    if frame is None or node is None or not is_waiting_at(frame, node.step["id"], node.step):
        return False
    if deadline.kind == "wait":
        _elapse(session, run, frame, deadline, now)
    elif deadline.kind == "signal":
        payload = {"signal": node.step["signal"]}
        _time_out(session, run, frame, node.step, deadline, "signal_timed_out", payload, now)
    else:
        task = session.scalar(
            select(Task).where(
                Task.run_pk == run.id, Task.status == "open", Task.node_id == deadline.node_id
            )
        )
        if task is not None:
            task.status = "timed_out"
        payload = {"task_id": task.id if task else None}
        _time_out(session, run, frame, node.step, deadline, "task_timed_out", payload, now)
    settle(session, run, layout)
    return True


def _elapse(session: Session, run: Run, frame: Frame, deadline: Deadline, now: datetime) -> None:
    # The event id is derived from the durable wait id, so it names this elapse uniquely.
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"almanac:wait_elapsed:{deadline.wait_id}"))
    payload = {
        "node_id": deadline.node_id,
        "deadline": format_utc_or_none(deadline.due_at),
        "wait_id": deadline.wait_id,
        "observed_at": format_utc_or_none(now),
        "event_id": event_id,
        "sequence": run.last_sequence + 1,
    }
    record(session, run, frame, now, "wait_elapsed", payload, deadline.node_id)
    complete_step(session, run, frame, now, None, deadline)


def _time_out(
    session: Session,
    run: Run,
    frame: Frame,
    step: dict[str, Any],
    deadline: Deadline,
    event_type: str,
    payload: dict[str, Any],
    now: datetime,
) -> None:
    on_timeout = step.get("on_timeout", "fail")
    payload = {
        **payload,
        "deadline": format_utc_or_none(deadline.due_at),
        "observed_at": format_utc_or_none(now),
        "on_timeout": on_timeout,
    }
    record(session, run, frame, now, event_type, payload, step["id"])
    if on_timeout == "continue":
        complete_step(session, run, frame, now, None, deadline)
        return
    error = {
        "type": event_type,
        "message": f"step {step['id']!r} timed out at {payload['deadline']}",
        "step": step["id"],
    }
    if run.status == "suspended":
        hold(run, frame, "fail", deadline, error=error)
    else:
        fail_run(session, run, now, error, step["id"])
