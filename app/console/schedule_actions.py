"""Pause, resume, trigger, delete and backfill from the console (POST + CSRF, grants checked).

Refusals are answered by the blueprint's error handler (app/console/errors.py): back to the
schedule's page with the reason, or the reason in place for trigger and backfill.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ, RUN_START, TRIGGER_MANAGE
from app.calendar import CalendarError, parse_instant
from app.console import errors
from app.console.common import actor, command
from app.console.htmx import in_place, reply
from app.console.session import namespace_view
from app.schedules import manual, service, store

bp = Blueprint("console_schedule_actions", __name__)
ONE = "/ns/<ns>/schedules/<schedule_id>"
RESULT = "schedules/_action_result.html"


def _detail(ns: str, schedule_id: str) -> str:
    return url_for("console_schedules.detail", ns=ns, schedule_id=schedule_id)


def back_to(args: dict[str, Any]) -> str:
    """Where an action on a schedule returns: the schedule's page."""
    return _detail(args["ns"], args["schedule_id"])


errors.register(bp, back_to=back_to)


def _revision() -> int | None:
    raw = request.form.get("revision", "")
    return inputs.ascii_int(raw)


@bp.post(f"{ONE}/pause")
@login_required
def pause(ns: str, schedule_id: str) -> Response:
    """Pause with an optional reason."""
    view = namespace_view(ns, TRIGGER_MANAGE)
    reason = request.form.get("reason", "").strip()[:500] or None
    session = context.session()
    service.pause(
        session,
        context.now(),
        view.current,
        actor(),
        command(reason),
        schedule_id,
        _revision(),
        reason,
    )
    session.commit()
    return reply(f"Paused {schedule_id}.", True, _detail(ns, schedule_id))


@bp.post(f"{ONE}/resume")
@login_required
def resume(ns: str, schedule_id: str) -> Response:
    """Resume from a fresh future cursor, under the acting user's authority."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    service.resume(
        session, context.now(), view.current, actor(), command(), schedule_id, _revision()
    )
    session.commit()
    return reply(f"Resumed {schedule_id}.", True, _detail(ns, schedule_id))


@bp.post(f"{ONE}/delete")
@login_required
def delete(ns: str, schedule_id: str) -> Response:
    """Soft-delete the schedule; then go back to the list."""
    view = namespace_view(ns, TRIGGER_MANAGE)
    session = context.session()
    service.delete(
        session, context.now(), view.current, actor(), command(), schedule_id, _revision()
    )
    session.commit()
    done = f"Deleted {schedule_id}; its history stays readable."
    return reply(done, True, url_for("console_schedules.index", ns=ns))


@bp.post(f"{ONE}/trigger")
@login_required
@in_place(RESULT)
def trigger(ns: str, schedule_id: str) -> Response:
    """Start a run now under the schedule's overlap policy."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    result = manual.trigger(session, context.now(), view.current, command(), schedule_id)
    session.commit()
    back = _detail(ns, schedule_id)
    if result.run_id:
        return reply(f"{result.outcome}: run {result.run_id}", True, back)
    return reply(f"{result.outcome}: {result.reason}", False, back)


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
    size = manual.backfill_size(schedule, start, end)
    if size is None:
        return f"More than {manual.MAX_BACKFILL} occurrences: split the range."
    return (
        f"This range holds {size} occurrence{'s' if size != 1 else ''}; "
        "ones already started are not started again."
    )


@bp.post(f"{ONE}/backfill")
@login_required
@in_place(RESULT)
def backfill(ns: str, schedule_id: str) -> Response:
    """Start a run for every canonical occurrence in [from, to)."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    start, end = _range()
    session = context.session()
    result = manual.backfill(
        session, context.now(), view.current, command(), schedule_id, start, end
    )
    session.commit()
    already = len(result.results) - result.started - result.skipped
    return reply(
        f"Backfill started {result.started} runs, skipped {result.skipped}, "
        f"{already} already started.",
        True,
        _detail(ns, schedule_id),
    )
