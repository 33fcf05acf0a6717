"""Runs list and detail (timeline, pending deadlines, signal, cancel, terminate); task inbox.

Refusals are answered by the blueprint's error handler (app/console/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, request, url_for
from flask_login import login_required
from sqlalchemy import select
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_MANAGE, RUN_READ
from app.console import errors
from app.console.common import actor, chosen, command, next_cursor, page_key
from app.console.gantt import gantt
from app.console.htmx import is_partial, render, reply
from app.console.redirects import local_target
from app.console.session import NamespaceView, namespace_view
from app.console.timefmt import utc
from app.db import Deadline, Run, RunHistoryEvent, Task, Workflow, WorkflowVersion
from app.errors import AlmanacError, ValidationFailed
from app.runs import incidents, signals, tasks
from app.runs import service as runs_service
from app.runs.errors import TaskClosed
from app.runs.steps_view import derive_steps
from app.schedules.queries import parse_after_sequence

bp = Blueprint("console_runs", __name__)
STEP_EVENTS = 5000
# The run page lists the first events of its history; `Load more` appends the next pages.
HISTORY_PAGE = 50
EVENT_COLUMNS = (
    RunHistoryEvent.sequence,
    RunHistoryEvent.event_type,
    RunHistoryEvent.node_id,
    RunHistoryEvent.branch_path,
    RunHistoryEvent.payload,
    RunHistoryEvent.recorded_at,
)
RUN_STATUSES = (
    "pending",
    "running",
    "waiting",
    "suspended",
    "completed",
    "failed",
    "cancelled",
    "terminated",
    "timed_out",
)


@bp.get("/ns/<ns>/runs")
@login_required
def index(ns: str) -> Response:
    """List runs, newest first, filtered by status."""
    view = namespace_view(ns, RUN_READ)
    statuses = chosen("status", RUN_STATUSES)
    bound = {"status": sorted(set(statuses))}
    rows, key = runs_service.list_runs(
        context.session(),
        view.current,
        50,
        page_key(ns, "runs", bound),
        runs_service.RunFilter(status=statuses),
    )
    cursor = next_cursor(ns, "runs", key, bound)
    next_url = url_for(".index", ns=ns, status=statuses, cursor=cursor) if cursor else None
    return render(
        "runs/index.html",
        "runs/_rows.html",
        ns=view,
        runs=rows,
        chosen=statuses,
        statuses=RUN_STATUSES,
        next_url=next_url,
        now=context.now(),
    )


@bp.get("/ns/<ns>/runs/<path:run_id>")
@login_required
def detail(ns: str, run_id: str) -> Response:
    """A run: its state, the timeline of its history, pending deadlines and controls."""
    view = namespace_view(ns, RUN_READ)
    session = context.session()
    run = runs_service.get_run(session, view.current, run_id)
    # The steps are derived from the whole history (up to a bound); the timeline shows its start.
    # Columns, not objects: ~400 events of a long run are only read here.
    events = list(
        session.execute(
            select(*EVENT_COLUMNS)
            .where(RunHistoryEvent.run_pk == run.id)
            .order_by(RunHistoryEvent.sequence)
            .limit(STEP_EVENTS + 1)
        )
    )
    now = context.now()
    steps = derive_steps(events[:STEP_EVENTS], now)
    deadlines = list(
        session.scalars(
            select(Deadline)
            .where(Deadline.run_pk == run.id, Deadline.consumed_at.is_(None))
            .order_by(Deadline.due_at)
        )
    )
    open_tasks, _ = tasks.list_tasks(
        session, view.current, 20, None, status="open", run_id=run.run_id
    )
    run_incidents, _ = incidents.list_incidents(session, view.current, 20, None, run=run)
    return render(
        "runs/detail.html",
        "runs/_detail_body.html",
        ns=view,
        run=run,
        workflow=session.get(Workflow, run.workflow_id),
        version=session.get(WorkflowVersion, run.workflow_version_id),
        events=events[:HISTORY_PAGE],
        next_after=events[HISTORY_PAGE - 1].sequence if len(events) > HISTORY_PAGE else None,
        steps=steps,
        chart=gantt(steps, now),
        deadlines=deadlines,
        tasks=open_tasks,
        incidents=[incident for incident, _run_id in run_incidents if not incident.resolved_at],
        resolved=[incident for incident, _run_id in run_incidents if incident.resolved_at],
        now=now,
    )


@bp.get("/ns/<ns>/runs/<path:run_id>/history")
@login_required
def history(ns: str, run_id: str) -> Response:
    """One page of a run's history after `after_sequence`: appended to the run page's list by
    `Load more`, or a page of its own without htmx."""
    view = namespace_view(ns, RUN_READ)
    session = context.session()
    run = runs_service.get_run(session, view.current, run_id)
    # The API's rule and answer (400 INVALID_CURSOR naming query.after_sequence), as the
    # schedule's history page reads it.
    after = parse_after_sequence(request.args.get("after_sequence"))
    events, more = runs_service.history(session, run, HISTORY_PAGE, [after] if after else None)
    return render(
        "runs/history.html",
        "runs/_history_page.html",
        ns=view,
        run=run,
        events=events,
        next_after=more[0] if more else None,
        after=after,
        now=context.now(),
    )


def back_to(args: dict[str, Any]) -> str:
    """Where a refused action returns: the page that sent it (`back`), else the run's page, or
    the inbox for a task."""
    if "run_id" in args:
        return _sent_back(_detail(args["ns"], args["run_id"]))
    return _sent_back(url_for("console_runs.inbox", ns=args["ns"]))


def _sent_back(default: str) -> str:
    """The form's `back` (the incidents page sends it, so the operator stays on the list), only
    ever a local path; `default` when the form has none."""
    back = request.form.get("back")
    return local_target(back) if back else default


errors.register(bp, back_to=back_to)


def _detail(ns: str, run_id: str) -> str:
    return url_for("console_runs.detail", ns=ns, run_id=run_id)


def _json_field(name: str) -> object:
    raw = request.form.get(name, "").strip()
    return inputs.loads(raw, [name]) if raw else None


@bp.post("/ns/<ns>/runs/<path:run_id>/signal")
@login_required
def signal(ns: str, run_id: str) -> Response:
    """Send a named signal with an optional JSON payload."""
    view = namespace_view(ns, RUN_MANAGE)
    name = request.form.get("name", "").strip()
    session = context.session()
    outcome = signals.send(
        session, context.now(), view.current, run_id, name, _json_field("payload")
    )
    session.commit()
    because = f" ({outcome.reason})" if outcome.reason else ""
    return reply(f"Signal {name!r}: {outcome.status}{because}", True, _detail(ns, run_id))


def _end(ns: str, run_id: str, operation: Callable[..., Any], done: str) -> Response:
    """Cancel or terminate the run, recording who asked (`command_context`)."""
    view = namespace_view(ns, RUN_MANAGE)
    session = context.session()
    operation(session, context.now(), view.current, run_id, None, command().to_json())
    session.commit()
    return reply(done, True, _detail(ns, run_id))


@bp.post("/ns/<ns>/runs/<path:run_id>/cancel")
@login_required
def cancel(ns: str, run_id: str) -> Response:
    """Ask the run to stop at its next step boundary."""
    return _end(ns, run_id, runs_service.cancel, "Cancel requested.")


@bp.post("/ns/<ns>/runs/<path:run_id>/terminate")
@login_required
def terminate(ns: str, run_id: str) -> Response:
    """End the run now."""
    return _end(ns, run_id, runs_service.terminate, "Terminated.")


@bp.post("/ns/<ns>/runs/<path:run_id>/incidents/<incident_id>/resolve")
@login_required
def resolve_incident(ns: str, run_id: str, incident_id: str) -> Response:
    """Resolve an open incident: retry the step, skip it (with an optional output), or fail."""
    view = namespace_view(ns, RUN_MANAGE)
    action = request.form.get("action", "")
    if action not in incidents.ACTIONS:
        raise ValidationFailed([{"loc": ["action"], "msg": "must be retry, skip or fail"}])
    output = _json_field("output") if action == "skip" else None
    session = context.session()
    incident, _run = incidents.resolve(
        session,
        context.now(),
        view.current,
        run_id,
        incident_id,
        action,
        output,
        command().to_json(),
    )
    session.commit()
    report = incident.report or {}
    done = (
        f"Incident resolved ({action}): {report.get('held_continuations', 0)} held "
        f"continuations released, {report.get('elapsed_waits', 0)} elapsed waits, "
        f"{report.get('timeouts', 0)} timeouts."
    )
    return reply(done, True, _sent_back(_detail(ns, run_id)))


@bp.get("/ns/<ns>/tasks")
@login_required
def inbox(ns: str) -> Response:
    """Open human tasks (or another status) with a completion form each."""
    view = namespace_view(ns, RUN_READ)
    return _inbox(view, chosen("status", tasks.TASK_STATUSES, "open", once=True)[0])


def _inbox(
    view: NamespaceView,
    status: str,
    task_error: tuple[str, str, str] | None = None,
    http_status: int = 200,
) -> Response:
    """The inbox; `task_error` is (task id, what the user typed, why it was refused), shown
    under that task with the input kept."""
    ns = view.current.name
    status = status if status in tasks.TASK_STATUSES else "open"
    rows, key = tasks.list_tasks(
        context.session(),
        view.current,
        50,
        page_key(ns, "tasks", {"status": status}),
        status=status,
    )
    cursor = next_cursor(ns, "tasks", key, {"status": status})
    next_url = url_for(".inbox", ns=ns, status=status, cursor=cursor) if cursor else None
    return render(
        "runs/tasks.html",
        "runs/_tasks.html",
        http_status,
        ns=view,
        tasks=rows,
        completable=tasks.completable([task for task, _ in rows], view.grants),
        task_status=status,
        statuses=tasks.TASK_STATUSES,
        next_url=next_url,
        now=context.now(),
        task_error=task_error,
    )


@bp.post("/ns/<ns>/tasks/<task_id>/complete")
@login_required
def complete_task(ns: str, task_id: str) -> Response:
    """Complete a task with a JSON output; output it cannot take is shown again under the task."""
    view = namespace_view(ns, RUN_MANAGE)
    session = context.session()
    raw = request.form.get("output", "")
    try:
        output = inputs.loads(raw, ["output"]) if raw.strip() else None
        tasks.complete(session, context.now(), view.current, actor(), task_id, output)
    except TaskClosed as exc:
        raise _closed(task_id, exc) from exc
    except AlmanacError as exc:
        if exc.http_status not in (400, 422):
            raise
        return _refused_output(view, task_id, raw, exc.message)
    session.commit()
    if is_partial():
        # The card alone, now completed: reloading the inbox would reset what was typed into
        # the other tasks.
        return _task_card(view, task_id, None, 200)
    return reply("Task completed.", True, url_for(".inbox", ns=ns))


def _closed(task_id: str, exc: TaskClosed) -> TaskClosed:
    """The refusal named by what the inbox shows (the task's title and step), not its id."""
    task = context.session().get(Task, task_id)
    if task is None:
        return exc
    name = f"Task “{task.title}” (step {task.node_id})"
    status = str(exc.details.get("status", task.status))
    if status == "too_late":
        text = f"{name} was due at {utc(task.due_at)}; it can no longer be completed."
    else:
        text = f"{name} is already {status.replace('_', ' ')}; nothing was done."
    return TaskClosed(task_id, status, text)


def _refused_output(view: NamespaceView, task_id: str, raw: str, why: str) -> Response:
    context.session().rollback()
    # Under the field labelled "Output": named so ("output is not valid JSON" read as code).
    if why.startswith("output "):
        why = "Output " + why.removeprefix("output ")
    if is_partial():
        return _task_card(view, task_id, (task_id, raw, why))
    return _inbox(view, "open", (task_id, raw, why), 422)


def _task_card(
    view: NamespaceView, task_id: str, task_error: tuple[str, str, str] | None, status: int = 422
) -> Response:
    """The task's card alone, swapped in place of it (refused, or completed when there is no
    `task_error`): re-rendering the whole inbox would reset what the operator typed into the
    other tasks."""
    task, run_id = (
        context.session()
        .execute(
            select(Task, Run.run_id)
            .join(Run, Run.id == Task.run_pk)
            .where(Task.namespace_id == view.current.id, Task.id == task_id)
        )
        .one()
    )
    return render(
        "runs/_task.html",
        "runs/_task.html",
        status,
        ns=view,
        task=task,
        run_id=run_id,
        completable=tasks.completable([task], view.grants),
        task_error=task_error,
        just_completed=task_error is None,
        now=context.now(),
    )
