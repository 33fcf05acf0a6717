"""The deadline scanner (SPEC §6.3, §6.4), called by every tick.

Due deadlines (`due_at <= now`: nothing wakes early) are applied in this order: run timeouts
first, then signal and task timeouts, then elapsed waits by due time and node id. A run that timed
out applies nothing else: `finish_run` consumes its other deadlines, which are then skipped.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, Task
from app.runs.definitions import step_at
from app.runs.lifecycle import append_event, finish_run
from app.runs.locking import begin_write
from app.runs.steps import complete_step, definition_of, fail_run

PAGE_SIZE = 200
ORDER = case({"run_timeout": 0, "signal": 1, "task": 1}, value=Deadline.kind, else_=2)


@dataclass
class ScanResult:
    applied: int = 0
    pages: int = 0


def due_page(session: Session, now: datetime, limit: int = PAGE_SIZE) -> list[tuple[Deadline, Run]]:
    """The next due, unconsumed deadlines in §6.4 order, with their runs locked.

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


def apply(session: Session, deadline: Deadline, run: Run, now: datetime) -> bool:
    """Apply one due deadline to its (locked) run; False if it no longer applies."""
    if deadline.consumed_at is not None:
        return False
    deadline.consumed_at = now
    if run.status not in ACTIVE_RUN_STATUSES:
        return False
    if deadline.kind == "run_timeout":
        finish_run(
            session,
            run,
            now,
            "timed_out",
            "run_timed_out",
            {
                "deadline": format_utc_or_none(deadline.due_at),
                "observed_at": format_utc_or_none(now),
            },
        )
        return True
    if run.status != "waiting" or run.current_step != deadline.node_id:
        return False
    step = step_at(definition_of(session, run), run.step_index)
    assert step is not None
    if deadline.kind == "wait":
        _elapse(session, run, deadline, now)
    elif deadline.kind == "signal":
        _time_out(
            session,
            run,
            step,
            "signal_timed_out",
            {
                "signal": step["signal"],
                "deadline": format_utc_or_none(deadline.due_at),
                "observed_at": format_utc_or_none(now),
                "on_timeout": step.get("on_timeout", "fail"),
            },
            now,
        )
    else:
        task = session.scalar(
            select(Task).where(
                Task.run_pk == run.id, Task.status == "open", Task.node_id == deadline.node_id
            )
        )
        if task is not None:
            task.status = "timed_out"
        _time_out(
            session,
            run,
            step,
            "task_timed_out",
            {
                "task_id": task.id if task else None,
                "deadline": format_utc_or_none(deadline.due_at),
                "observed_at": format_utc_or_none(now),
                "on_timeout": step.get("on_timeout", "fail"),
            },
            now,
        )
    return True


def _elapse(session: Session, run: Run, deadline: Deadline, now: datetime) -> None:
    # The event id is derived from the durable wait id, so it names this elapse uniquely.
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"almanac:wait_elapsed:{deadline.wait_id}"))
    append_event(
        session,
        run,
        now,
        "wait_elapsed",
        {
            "node_id": deadline.node_id,
            "deadline": format_utc_or_none(deadline.due_at),
            "wait_id": deadline.wait_id,
            "observed_at": format_utc_or_none(now),
            "event_id": event_id,
            "sequence": run.last_sequence + 1,
        },
        deadline.node_id,
    )
    complete_step(session, run, now, None)


def _time_out(
    session: Session,
    run: Run,
    step: dict[str, Any],
    event_type: str,
    payload: dict[str, Any],
    now: datetime,
) -> None:
    append_event(session, run, now, event_type, payload, step["id"])
    if step.get("on_timeout", "fail") == "continue":
        complete_step(session, run, now, None)
    else:
        fail_run(
            session,
            run,
            now,
            {
                "type": event_type,
                "message": f"step {step['id']!r} timed out at {payload['deadline']}",
                "step": step["id"],
            },
        )
