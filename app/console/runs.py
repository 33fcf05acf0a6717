"""Runs list and detail (timeline, pending deadlines, signal, cancel, terminate); task inbox."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, request, url_for
from flask_login import login_required
from sqlalchemy import select
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_MANAGE, RUN_READ
from app.console.common import actor, next_cursor, page_key
from app.console.htmx import render
from app.console.session import namespace_view
from app.db import Deadline
from app.errors import AlmanacError
from app.runs import service as runs_service
from app.runs import signals, tasks

bp = Blueprint("console_runs", __name__)
RUN_STATUSES = (
    "pending",
    "running",
    "waiting",
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
    chosen = [s for s in request.args.getlist("status") if s in RUN_STATUSES]
    rows, key = runs_service.list_runs(
        context.session(),
        view.current,
        50,
        page_key(ns, "runs"),
        runs_service.RunFilter(status=chosen),
    )
    cursor = next_cursor(ns, "runs", key)
    next_url = url_for(".index", ns=ns, status=chosen, cursor=cursor) if cursor else None
    return render(
        "runs/index.html",
        "runs/_rows.html",
        ns=view,
        runs=rows,
        chosen=chosen,
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
    events, _ = runs_service.history(session, run, 500, None)
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
    return render(
        "runs/detail.html",
        "runs/_detail_body.html",
        ns=view,
        run=run,
        events=events,
        deadlines=deadlines,
        tasks=open_tasks,
        now=context.now(),
    )


def _json_field(name: str) -> object:
    raw = request.form.get(name, "").strip()
    return inputs.loads(raw, [name]) if raw else None


def _act(ns: str, back: str, apply: Any, done: str) -> Response:
    """Apply one run.manage operation; refusals and bad JSON become a message, then go `back`."""
    view = namespace_view(ns, RUN_MANAGE)
    session = context.session()
    try:
        message = apply(session, view.current) or done
    except ValueError as exc:
        session.rollback()
        flash(f"That is not valid JSON: {exc}", "error")
    except AlmanacError as exc:
        session.rollback()
        flash(exc.message, "error")
    else:
        session.commit()
        flash(message, "ok")
    return redirect(back)


def _run_action(ns: str, run_id: str, apply: Any, done: str) -> Response:
    return _act(ns, url_for(".detail", ns=ns, run_id=run_id), apply, done)


@bp.post("/ns/<ns>/runs/<path:run_id>/signal")
@login_required
def signal(ns: str, run_id: str) -> Response:
    """Send a named signal with an optional JSON payload."""
    name = request.form.get("name", "").strip()

    def apply(session, namespace):  # type: ignore[no-untyped-def]
        outcome = signals.send(
            session, context.now(), namespace, run_id, name, _json_field("payload")
        )
        return f"Signal {name!r}: {outcome.status}" + (
            f" ({outcome.reason})" if outcome.reason else ""
        )

    return _run_action(ns, run_id, apply, "")


def _end(ns: str, run_id: str, operation: Any, done: str) -> Response:
    """Cancel or terminate the run, recording who asked."""

    def apply(session: Any, namespace: Any) -> None:
        operation(session, context.now(), namespace, run_id, f"console: {actor().username}")

    return _run_action(ns, run_id, apply, done)


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


@bp.get("/ns/<ns>/tasks")
@login_required
def inbox(ns: str) -> Response:
    """Open human tasks (or another status) with a completion form each."""
    view = namespace_view(ns, RUN_READ)
    status = request.args.get("status", "open")
    status = status if status in tasks.TASK_STATUSES else "open"
    rows, key = tasks.list_tasks(
        context.session(), view.current, 50, page_key(ns, "tasks"), status=status
    )
    cursor = next_cursor(ns, "tasks", key)
    next_url = url_for(".inbox", ns=ns, status=status, cursor=cursor) if cursor else None
    return render(
        "runs/tasks.html",
        "runs/_tasks.html",
        ns=view,
        tasks=rows,
        task_status=status,
        statuses=tasks.TASK_STATUSES,
        next_url=next_url,
        now=context.now(),
    )


@bp.post("/ns/<ns>/tasks/<task_id>/complete")
@login_required
def complete_task(ns: str, task_id: str) -> Response:
    """Complete a task with a JSON output."""
    return _act(
        ns,
        url_for(".inbox", ns=ns),
        lambda session, namespace: (
            tasks.complete(
                session, context.now(), namespace, actor(), task_id, _json_field("output")
            )
            and None
        ),
        "Task completed.",
    )
