"""Pause, resume, trigger, delete and backfill from the console (POST + CSRF, grants checked)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, flash, make_response, redirect, render_template, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ, RUN_START, TRIGGER_MANAGE
from app.calendar import CalendarError, parse_instant
from app.console.common import actor, command
from app.console.htmx import is_partial
from app.console.session import namespace_view
from app.errors import AlmanacError
from app.schedules import forecast, manual, status, store
from app.schedules.errors import RevisionConflict

bp = Blueprint("console_schedule_actions", __name__)
ONE = "/ns/<ns>/schedules/<schedule_id>"


def _go(target: str) -> Response:
    """Redirect; an htmx request is told to navigate instead of swapping the page in."""
    if is_partial():
        response = make_response("", 204)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def _revision() -> int | None:
    raw = request.form.get("revision", "")
    return inputs.ascii_int(raw)


def _change(
    ns: str,
    schedule_id: str,
    needs: tuple[str, ...],
    apply: Callable[..., Any],
    done: str,
    then: str | None = None,
) -> Response:
    """Run one state change; conflicts and refusals become a message on the detail page."""
    view = namespace_view(ns, *needs)
    session = context.session()
    detail = url_for("console_schedules.detail", ns=ns, schedule_id=schedule_id)
    try:
        apply(session, context.now(), view.current, actor(), schedule_id)
    except RevisionConflict as exc:
        session.rollback()
        flash(
            f"Someone else changed {schedule_id} (now revision "
            f"{exc.details.get('current_revision')}); the page is reloaded, try again.",
            "error",
        )
        return _go(detail)
    except AlmanacError as exc:
        session.rollback()
        flash(exc.message, "error")
        return _go(detail)
    session.commit()
    flash(done, "ok")
    return _go(then or detail)


@bp.post(f"{ONE}/pause")
@login_required
def pause(ns: str, schedule_id: str) -> Response:
    """Pause with an optional reason."""
    reason = request.form.get("reason", "").strip()[:500] or None
    return _change(
        ns,
        schedule_id,
        (TRIGGER_MANAGE,),
        lambda s, now, n, a, sid: status.pause(
            s, now, n, a, command(reason), sid, _revision(), reason
        ),
        f"Paused {schedule_id}.",
    )


@bp.post(f"{ONE}/resume")
@login_required
def resume(ns: str, schedule_id: str) -> Response:
    """Resume from a fresh future cursor, under the acting user's authority."""
    return _change(
        ns,
        schedule_id,
        (TRIGGER_MANAGE, RUN_START),
        lambda s, now, n, a, sid: status.resume(s, now, n, a, command(), sid, _revision()),
        f"Resumed {schedule_id}.",
    )


@bp.post(f"{ONE}/delete")
@login_required
def delete(ns: str, schedule_id: str) -> Response:
    """Soft-delete the schedule; then go back to the list."""
    return _change(
        ns,
        schedule_id,
        (TRIGGER_MANAGE,),
        lambda s, now, n, a, sid: status.delete(s, now, n, a, command(), sid, _revision()),
        f"Deleted {schedule_id}; its history stays readable.",
        then=url_for("console_schedules.index", ns=ns),
    )


def _result(ns: str, schedule_id: str, message: str, ok: bool) -> Response:
    if is_partial():
        response = make_response(
            render_template("schedules/_action_result.html", message=message, ok=ok)
        )
        response.vary.add("HX-Request")
        return response
    flash(message, "ok" if ok else "error")
    return redirect(url_for("console_schedules.detail", ns=ns, schedule_id=schedule_id))


@bp.post(f"{ONE}/trigger")
@login_required
def trigger(ns: str, schedule_id: str) -> Response:
    """Start a run now under the schedule's overlap policy."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    try:
        result = manual.trigger(
            session, context.now(), view.current, actor(), command(), schedule_id
        )
    except AlmanacError as exc:
        session.rollback()
        return _result(ns, schedule_id, exc.message, False)
    session.commit()
    if result.run_id:
        return _result(ns, schedule_id, f"{result.outcome}: run {result.run_id}", True)
    return _result(ns, schedule_id, f"{result.outcome}: {result.reason}", False)


def _range() -> tuple[Any, Any]:
    start = parse_instant(request.values.get("from", "").strip(), ("from",))
    end = parse_instant(request.values.get("to", "").strip(), ("to",))
    return start, end


@bp.get(f"{ONE}/backfill/count")
@login_required
def backfill_count(ns: str, schedule_id: str) -> str:
    """How many canonical occurrences a backfill range holds (the preview before confirming)."""
    view = namespace_view(ns, RUN_READ)
    schedule = store.get(context.session(), view.current, schedule_id)
    try:
        start, end = _range()
    except CalendarError as exc:
        return f"{exc.loc[0] if exc.loc else 'range'}: {exc.msg}"
    if end <= start:
        return "'to' must be after 'from'."
    size = forecast.backfill_size(schedule, start, end)
    if size is None:
        return f"More than {forecast.MAX_BACKFILL} occurrences: split the range."
    return (
        f"This range holds {size} occurrence{'s' if size != 1 else ''}; "
        "ones already started are not started again."
    )


@bp.post(f"{ONE}/backfill")
@login_required
def backfill(ns: str, schedule_id: str) -> Response:
    """Start a run for every canonical occurrence in [from, to)."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    try:
        start, end = _range()
        result = manual.backfill(
            session, context.now(), view.current, actor(), command(), schedule_id, start, end
        )
    except CalendarError as exc:
        return _result(ns, schedule_id, f"{exc.loc[0] if exc.loc else 'range'}: {exc.msg}", False)
    except AlmanacError as exc:
        session.rollback()
        return _result(ns, schedule_id, exc.message, False)
    session.commit()
    return _result(
        ns,
        schedule_id,
        f"Backfill started {result.started} runs, skipped "
        f"{result.skipped}, {len(result.results) - result.started - result.skipped} "
        "already started.",
        True,
    )
