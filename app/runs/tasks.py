"""Human tasks: the inbox, and completing a task with a JSON output."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.auth.grants import ROLE_GRANTS, RUN_MANAGE, grants_of
from app.calendar import format_utc_or_none
from app.db import Namespace, User
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, Task
from app.errors import Forbidden
from app.paging import created_key, newest_first, split_page
from app.runs.deadlines import refuse_after_run_timeout
from app.runs.errors import RunFinished, TaskClosed, TaskNotFound
from app.runs.frames import branch_path_of, frame_of_node, settle
from app.runs.lifecycle import append_event
from app.runs.locking import begin_write, for_update
from app.runs.service import check_size
from app.runs.steps import complete_step, layout_for

TASK_STATUSES = ("open", "completed", "timed_out", "cancelled")


def grants_missing(task: Task, held: frozenset[str]) -> list[str]:
    """The grants `held` lacks to complete `task`: `run.manage`, and every grant of the role the
    task names (docs/runs.md); empty when the holder may complete it."""
    needed = {RUN_MANAGE} | (ROLE_GRANTS[task.role] if task.role else set())
    return sorted(needed - held)


def completable(tasks: list[Task], held: frozenset[str]) -> set[str]:
    """The ids of the open tasks among `tasks` that a holder of `held` may complete."""
    return {task.id for task in tasks if task.status == "open" and not grants_missing(task, held)}


def list_tasks(
    session: Session,
    namespace: Namespace,
    limit: int,
    after: list[Any] | None,
    *,
    status: str | None = None,
    run_id: str | None = None,
) -> tuple[list[tuple[Task, str]], list[Any] | None]:
    """Tasks newest first with their run's id, one keyset page."""
    query = (
        select(Task, Run.run_id)
        .join(Run, Run.id == Task.run_pk)
        .where(Task.namespace_id == namespace.id)
    )
    if status:
        query = query.where(Task.status == status)
    if run_id:
        query = query.where(Run.run_id == run_id)
    query = newest_first(query, Task.created_at, Task.id, after, limit)
    rows = [(row[0], row[1]) for row in session.execute(query)]
    return split_page(rows, limit, lambda row: created_key(row[0]))


def complete(
    session: Session, now: datetime, namespace: Namespace, user: User, task_id: str, output: Any
) -> tuple[Task, Run]:
    """Complete an open task strictly before its deadline and move its run on; caller commits.

    The caller checked `run.manage`; a task naming a `role` also needs every grant of that role.
    """
    check_size("output", output)
    begin_write(session)
    task = session.get(Task, task_id)
    if task is None or task.namespace_id != namespace.id:
        raise TaskNotFound(task_id)
    run = session.scalar(for_update(session, select(Run).where(Run.id == task.run_pk)))
    assert run is not None
    session.refresh(task)
    if task.role:
        missing = grants_missing(task, grants_of(session, user, namespace))
        if missing:
            raise Forbidden(missing[0], namespace.name)
    if task.status != "open":
        raise TaskClosed(task.id, task.status)
    if run.status not in ACTIVE_RUN_STATUSES:
        raise RunFinished(run.run_id, run.status)
    refuse_after_run_timeout(session, run, now)
    if task.due_at is not None and now >= task.due_at:
        raise TaskClosed(
            task.id,
            "too_late",
            f"task {task.id!r} was due at {format_utc_or_none(task.due_at)}; "
            "a completion must come strictly before it",
        )
    task.status = "completed"
    task.output = output
    task.completed_at = now
    task.completed_by = user.username
    session.execute(
        update(Deadline)
        .where(
            Deadline.run_pk == run.id,
            Deadline.kind == "task",
            Deadline.node_id == task.node_id,
            Deadline.consumed_at.is_(None),
        )
        .values(consumed_at=now)
    )
    layout = layout_for(session, run)
    frame = frame_of_node(session, run, layout, task.node_id)
    assert frame is not None
    append_event(
        session,
        run,
        now,
        "task_completed",
        {
            "task_id": task.id,
            "output": output,
            "completed_by": user.username,
            "accepted_at": format_utc_or_none(now),
            "deadline": format_utc_or_none(task.due_at),
        },
        task.node_id,
        branch_path_of(frame),
    )
    complete_step(session, run, frame, now, output)
    settle(session, run, layout)
    return task, run
