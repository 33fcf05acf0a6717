"""Runs, their history and replay, signals, cancel and terminate, and tasks (docs/api.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from sqlalchemy.orm import Session

from app import context
from app.api import errors
from app.api.routing import (
    PAGE,
    command,
    current_user,
    list_of,
    one_of,
    operation,
    page_args,
    page_json,
    parse_body,
    repeatable,
)
from app.api.run_models import ReasonIn, RunIn, SignalIn, TaskCompleteIn
from app.auth.grants import RUN_MANAGE, RUN_READ, RUN_START
from app.calendar import format_utc, format_utc_or_none
from app.db import Namespace, Run, RunHistoryEvent, Task, Workflow, WorkflowVersion
from app.db.runs import ACTIVE_RUN_STATUSES, FINAL_RUN_STATUSES
from app.errors import BadRequest, ValidationFailed
from app.runs import replay, service, signals, tasks
from app.schedules.config import label_pair
from app.schedules.queries import parse_after_sequence

bp = Blueprint("api_runs", __name__)
errors.register(bp)

RUN_STATUSES = (*ACTIVE_RUN_STATUSES, *FINAL_RUN_STATUSES)


def run_json(session: Session, run: Run, namespace: Namespace) -> dict[str, Any]:
    flow = session.get(Workflow, run.workflow_id)
    version = session.get(WorkflowVersion, run.workflow_version_id)
    assert flow is not None and version is not None
    return {
        "run_id": run.run_id,
        "uid": run.uid,
        "namespace": namespace.name,
        "workflow": flow.name,
        "version": version.version,
        "activation_id": run.activation_id,
        "schedule_id": run.schedule_id,
        "status": run.status,
        "input": run.input,
        "output": run.output,
        "error": run.error,
        "current_step": run.current_step,
        "queue": run.queue,
        "labels": run.labels or {},
        "memo": run.memo or {},
        "search_attributes": run.search_attributes or {},
        "created_at": format_utc_or_none(run.created_at),
        "started_at": format_utc_or_none(run.started_at),
        "finished_at": format_utc_or_none(run.finished_at),
    }


def event_json(event: RunHistoryEvent) -> dict[str, Any]:
    body = {
        "id": event.id,
        "sequence": event.sequence,
        "event_type": event.event_type,
        "node_id": event.node_id,
        "payload": event.payload,
        "recorded_at": format_utc_or_none(event.recorded_at),
    }
    if event.branch_path:
        # Only events inside parallel branches carry the branches they happened in.
        body["branch_path"] = list(event.branch_path)
    return body


def task_json(task: Task, run_id: str) -> dict[str, Any]:
    return {
        "id": task.id,
        "run_id": run_id,
        "node_id": task.node_id,
        "title": task.title,
        "role": task.role,
        "status": task.status,
        "output": task.output,
        "created_at": format_utc_or_none(task.created_at),
        "due_at": format_utc_or_none(task.due_at),
        "completed_at": format_utc_or_none(task.completed_at),
        "completed_by": task.completed_by,
    }


def _pairs(name: str) -> tuple[tuple[str, str], ...]:
    """Repeated `name=key:value` query parameters, every one to match (a key given twice with
    two values matches nothing, as on the schedules list), else 422."""
    if name == "label":
        # Labels read as everywhere else: key:value, or key=value.
        return tuple(label_pair(raw, ("query", name)) for raw in request.args.getlist(name))
    pairs = []
    for raw in request.args.getlist(name):
        key, sep, value = raw.partition(":")
        if not sep or not key:
            raise ValidationFailed([{"loc": ["query", name], "msg": "must be key:value"}])
        pairs.append((key, value))
    return tuple(pairs)


def _run_filter() -> service.RunFilter:
    statuses = [s for s in (request.args.get("status") or "").split(",") if s]
    for status in statuses:
        if status not in RUN_STATUSES:
            raise ValidationFailed(
                [{"loc": ["query", "status"], "msg": f"must be among {', '.join(RUN_STATUSES)}"}]
            )
    return service.RunFilter(
        status=statuses,
        workflow=request.args.get("workflow") or None,
        schedule_id=request.args.get("schedule_id") or None,
        labels=_pairs("label"),
        search_attributes=_pairs("search_attribute"),
    )


@operation(
    bp,
    "POST",
    "/runs",
    summary="Start a run (idempotent on run_id)",
    grant=RUN_START,
    body=RunIn,
    status=201,
    also=(200,),
    namespaced=True,
)
def start_run(namespace: Namespace) -> Any:
    """Start a run; the same run_id again answers the existing run with 200."""
    body = parse_body(RunIn)
    session = context.session()
    run, created = service.start(
        session,
        context.now(),
        namespace,
        service.RunRequest(**body.model_dump()),
        command().to_json(),
    )
    # The answer is read in the transaction that wrote the run: a later one is bound to the
    # user's namespaces again, and a user disabled meanwhile would see none (a 500 for a run
    # that started, which a client might start again).
    answer = run_json(session, run, namespace)
    session.commit()
    return jsonify(answer), (201 if created else 200)


@operation(
    bp,
    "GET",
    "/runs",
    summary="List runs, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[
        ("status", "comma-separated statuses", list_of(RUN_STATUSES)),
        ("workflow", "workflow name"),
        ("schedule_id", "started by this schedule"),
        repeatable("label", "key:value (repeatable; all must match)"),
        repeatable("search_attribute", "key:value (repeatable; all must match)"),
        *PAGE,
    ],
)
def list_runs(namespace: Namespace) -> Any:
    """List runs with filters."""
    where = _run_filter()
    limit, after = page_args(namespace.name, "runs")
    session = context.session()
    rows, key = service.list_runs(session, namespace, limit, after, where)
    items = [run_json(session, run, namespace) for run, _name in rows]
    return jsonify(page_json(namespace.name, "runs", items, key))


@operation(bp, "GET", "/runs/<run_id>", summary="A run", grant=RUN_READ, namespaced=True)
def get_run(namespace: Namespace, run_id: str) -> Any:
    """Show a run."""
    session = context.session()
    return jsonify(run_json(session, service.get_run(session, namespace, run_id), namespace))


@operation(
    bp,
    "GET",
    "/runs/<run_id>/history",
    summary="A run's history events in order",
    grant=RUN_READ,
    namespaced=True,
    query=[*PAGE, ("after_sequence", "the last sequence read: only events after it")],
)
def run_history(namespace: Namespace, run_id: str) -> Any:
    """List a run's history events by sequence: from a page's `cursor`, or after a sequence
    already read (`after_sequence`, to follow a run whose last page had no cursor)."""
    session = context.session()
    run = service.get_run(session, namespace, run_id)
    limit, after = page_args(namespace.name, f"run-history:{run.uid}")
    # Empty is absent, as for every query parameter: only a value competes with the cursor.
    if request.args.get("after_sequence"):
        if after is not None:
            raise BadRequest("give either cursor or after_sequence, not both")
        after = [parse_after_sequence(request.args.get("after_sequence"))]
    events, key = service.history(session, run, limit, after)
    return jsonify(
        page_json(namespace.name, f"run-history:{run.uid}", [event_json(e) for e in events], key)
    )


@operation(
    bp,
    "GET",
    "/runs/<run_id>/replay",
    summary="Replayed state beside the stored one",
    grant=RUN_READ,
    namespaced=True,
)
def replay_run(namespace: Namespace, run_id: str) -> Any:
    """Rebuild the run's state from its history and compare it with the stored state."""
    session = context.session()
    return jsonify(replay.compare(session, service.get_run(session, namespace, run_id)))


@operation(
    bp,
    "POST",
    "/runs/<run_id>/signals/<name>",
    summary="Send a signal to a run",
    grant=RUN_MANAGE,
    body=SignalIn,
    status=202,
    namespaced=True,
)
def send_signal(namespace: Namespace, run_id: str, name: str) -> Any:
    """Accept a signal: delivered, buffered for a later step, or ignored (with a reason)."""
    body = parse_body(SignalIn)
    session = context.session()
    outcome = signals.send(session, context.now(), namespace, run_id, name, body.payload)
    session.commit()
    return jsonify(
        {
            "signal_id": outcome.signal.id,
            "accepted_at": format_utc(outcome.signal.accepted_at),
            "status": outcome.status,
            "reason": outcome.reason,
        }
    ), 202


@operation(
    bp,
    "POST",
    "/runs/<run_id>/cancel",
    summary="Cancel a run at its next step boundary",
    grant=RUN_MANAGE,
    body=ReasonIn,
    namespaced=True,
)
def cancel_run(namespace: Namespace, run_id: str) -> Any:
    """Request cancellation; a waiting or pending run is cancelled at once."""
    body = parse_body(ReasonIn)
    session = context.session()
    by = command(body.reason).to_json()
    run = service.cancel(session, context.now(), namespace, run_id, body.reason, by)
    answer = run_json(session, run, namespace)
    session.commit()
    return jsonify(answer)


@operation(
    bp,
    "POST",
    "/runs/<run_id>/terminate",
    summary="Terminate a run immediately",
    grant=RUN_MANAGE,
    body=ReasonIn,
    namespaced=True,
)
def terminate_run(namespace: Namespace, run_id: str) -> Any:
    """End a run now, discarding the result of a step in progress."""
    body = parse_body(ReasonIn)
    session = context.session()
    by = command(body.reason).to_json()
    run = service.terminate(session, context.now(), namespace, run_id, body.reason, by)
    answer = run_json(session, run, namespace)
    session.commit()
    return jsonify(answer)


@operation(
    bp,
    "GET",
    "/tasks",
    summary="The task inbox, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[
        ("status", "open, completed, timed_out or cancelled", one_of(tasks.TASK_STATUSES)),
        ("run_id", "only this run's"),
        *PAGE,
    ],
)
def list_tasks(namespace: Namespace) -> Any:
    """List human tasks."""
    status = request.args.get("status") or None
    if status is not None and status not in tasks.TASK_STATUSES:
        raise ValidationFailed(
            [
                {
                    "loc": ["query", "status"],
                    "msg": f"must be one of {', '.join(tasks.TASK_STATUSES)}",
                }
            ]
        )
    limit, after = page_args(namespace.name, "tasks")
    rows, key = tasks.list_tasks(
        context.session(),
        namespace,
        limit,
        after,
        status=status,
        run_id=request.args.get("run_id") or None,
    )
    return jsonify(page_json(namespace.name, "tasks", [task_json(t, r) for t, r in rows], key))


@operation(
    bp,
    "POST",
    "/tasks/<task_id>/complete",
    summary="Complete a human task",
    grant=RUN_MANAGE,
    body=TaskCompleteIn,
    namespaced=True,
)
def complete_task(namespace: Namespace, task_id: str) -> Any:
    """Complete an open task with a JSON output, strictly before its deadline."""
    body = parse_body(TaskCompleteIn)
    session = context.session()
    task, run = tasks.complete(
        session, context.now(), namespace, current_user(), task_id, body.output
    )
    session.commit()
    return jsonify(task_json(task, run.run_id))
