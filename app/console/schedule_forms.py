"""Create and edit forms with live calendar preview and inline errors; revision conflicts."""

from __future__ import annotations

import json
from typing import Any
from zoneinfo import available_timezones

from flask import Blueprint, redirect, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ, RUN_START, TRIGGER_MANAGE
from app.calendar import CalendarError, Spec, SpecRangeError
from app.calendar.describe import zone_note
from app.console import errors, typed
from app.console.common import actor, command
from app.console.forms import (
    CALENDAR_FIELDS,
    LABELS,
    bounded_int,
    errors_of,
    form_errors,
    form_from_config,
    labelled,
    request_from_form,
    spec_from_form,
    summary,
)
from app.console.htmx import render
from app.console.session import NamespaceView, namespace_view
from app.errors import AlmanacError
from app.schedules import service, store
from app.schedules.errors import RevisionConflict, ScheduleDeleted
from app.schedules.simulate_start import preview_start

bp = Blueprint("console_schedule_forms", __name__)
errors.register(bp)
ZONES = sorted(available_timezones() - {"localtime", "Factory"})
DEFAULTS = {
    "timezone": "UTC",
    "overlap_policy": "skip",
    "missed_policy": "skip",
    "input": "{}",
    "memo": "{}",
    "search_attributes": "{}",
    "jitter_seconds": "0",
}


def _form_page(
    view: NamespaceView,
    values: dict[str, Any],
    *,
    editing: str | None = None,
    errors: dict[str, str] | None = None,
    conflict: dict[str, Any] | None = None,
    status: int = 200,
    restored: bool = False,
) -> Response:
    return render(
        "schedules/form.html",
        "schedules/form.html",
        status,
        restored=restored,
        ns=view,
        values=values,
        editing=editing,
        errors=errors or {},
        summary=summary(errors or {}),
        conflict=conflict,
        zones=ZONES,
    )


TAKEN_ID = "a schedule with this id already exists: choose another id, or edit that schedule"
DELETED_ID = "a deleted schedule had this id, and ids are never reused: choose another id"


def _errors_of(exc: Exception) -> dict[str, str]:
    return errors_of(exc, request.form)


@bp.get("/ns/<ns>/schedules/new")
@login_required
def new(ns: str) -> Response:
    """Show an empty schedule form."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    kept = typed.draft("console_schedule_forms.create")
    if kept is not None:
        return _form_page(view, kept, restored=True)
    return _form_page(view, dict(DEFAULTS))


@bp.post("/ns/<ns>/schedules/new")
@login_required
def create(ns: str) -> Response:
    """Save a new schedule from the form; re-show it with errors next to the fields."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    mistakes = form_errors(request.form, now=context.now())
    if mistakes:
        return _form_page(view, request.form.to_dict(), errors=mistakes, status=422)
    try:
        data = request_from_form(request.form)
        schedule, _ = service.save(
            session, context.now(), view.current, actor(), command(), data, None
        )
    except (RevisionConflict, ScheduleDeleted) as exc:
        # The API's answer (`If-Match` needed, or deleted) names nothing a form has: here it
        # is the id field that is wrong.
        session.rollback()
        taken = TAKEN_ID if isinstance(exc, RevisionConflict) else DELETED_ID
        return _form_page(view, request.form.to_dict(), errors={"schedule_id": taken}, status=422)
    except (AlmanacError, CalendarError, SpecRangeError) as exc:
        session.rollback()
        return _form_page(view, request.form.to_dict(), errors=_errors_of(exc), status=422)
    session.commit()
    return redirect(url_for("console_schedules.detail", ns=ns, schedule_id=schedule.schedule_id))


@bp.get("/ns/<ns>/schedules/<schedule_id>/edit")
@login_required
def edit(ns: str, schedule_id: str) -> Response:
    """Show the form filled with the schedule's current configuration."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    schedule = store.get(context.session(), view.current, schedule_id)
    kept = typed.draft(f"console_schedule_forms.update:{schedule_id}")
    if kept is not None and kept.get("revision"):
        # Posted after its session ended: back as typed, still at the revision it was loaded
        # at (a change made meanwhile is a conflict on Save, never overwritten).
        return _form_page(view, kept, editing=schedule_id, restored=True)
    values = form_from_config(schedule_id, store.config_of(schedule).to_json())
    values["revision"] = str(schedule.revision)
    return _form_page(view, values, editing=schedule_id)


@bp.post("/ns/<ns>/schedules/<schedule_id>/edit")
@login_required
def update(ns: str, schedule_id: str) -> Response:
    """Replace the schedule at the revision the form was loaded with."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    revision = request.form.get("revision", "")
    stored = store.config_of(store.get(session, view.current, schedule_id)).to_json()
    mistakes = form_errors(request.form, stored, context.now())
    if mistakes:
        return _form_page(
            view, request.form.to_dict(), editing=schedule_id, errors=mistakes, status=422
        )
    try:
        data = request_from_form(request.form, stored) | {"schedule_id": schedule_id}
        service.save(
            session,
            context.now(),
            view.current,
            actor(),
            command(),
            data,
            inputs.ascii_int(revision),
        )
    except RevisionConflict as exc:
        session.rollback()
        return _form_page(
            view,
            request.form.to_dict(),
            editing=schedule_id,
            status=409,
            conflict=_conflict(view, schedule_id, exc),
        )
    except (AlmanacError, CalendarError, SpecRangeError) as exc:
        session.rollback()
        return _form_page(
            view, request.form.to_dict(), editing=schedule_id, errors=_errors_of(exc), status=422
        )
    session.commit()
    return redirect(url_for("console_schedules.detail", ns=ns, schedule_id=schedule_id))


def _conflict(view: NamespaceView, schedule_id: str, exc: RevisionConflict) -> dict[str, Any]:
    """What someone else changed: the current revision and the fields that differ from the form."""
    schedule = store.get(context.session(), view.current, schedule_id)
    current = form_from_config(schedule_id, store.config_of(schedule).to_json())
    differing = [
        name
        for name, value in current.items()
        if name != "schedule_id" and _differs(request.form.get(name) or "", value)
    ]
    return {
        "current_revision": exc.details.get("current_revision"),
        "fields": differing,
        "labels": [LABELS.get(name, name.replace("_", " ")) for name in differing],
        "status": schedule.status,
    }


def _differs(submitted: str, current: str) -> bool:
    """Whether a submitted field says something else than the current value: a browser sends a
    textarea with CRLF line endings, and JSON may be spaced otherwise."""
    if _lines(submitted) == _lines(current):
        return False
    try:
        return bool(json.loads(submitted) != json.loads(current))
    except (ValueError, RecursionError):
        return True


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _due_times(view: NamespaceView, spec: Spec, jitter: int, named: str | None) -> list[Any]:
    """The due times the schedule fires once saved (`preview_start`). Jitter is drawn from the
    schedule's uid: an edited schedule previews its own due times, a new one those the form's
    simulation shows (docs/console.md)."""
    now = context.now()
    return preview_start(context.session(), view.current, named, spec, now).due_times(
        spec, 8, jitter, now
    )


# The fields the live preview reads: their mistakes are named under it.
PREVIEWED_FIELDS = frozenset({*CALENDAR_FIELDS, "jitter_seconds"})


@bp.post("/ns/<ns>/calendar/preview")
@login_required
def live_preview(ns: str) -> Response:
    """The live preview under the calendar fields (htmx, debounced)."""
    view = namespace_view(ns, RUN_READ)
    items, error, note = [], None, None
    if not any(request.form.get(name, "").strip() for name in ("cron_expressions", "intervals")):
        # Nothing typed yet is not a mistake.
        return render(
            "schedules/_preview.html", "schedules/_preview.html", ns=view, items=[], empty=True
        )
    # Every mistake of the calendar's fields at once, as Save lists them (not only the first).
    mistakes = {
        name: message
        for name, message in form_errors(request.form).items()
        if name in PREVIEWED_FIELDS
    }
    if mistakes:
        return render(
            "schedules/_preview.html",
            "schedules/_preview.html",
            ns=view,
            items=[],
            error=labelled(mistakes),
        )
    try:
        spec = Spec.from_dict(spec_from_form(request.form))
        # A jitter the save would refuse is named here too, not previewed as another value.
        jitter = bounded_int(request.form, "jitter_seconds") or 0
        named = request.args.get("schedule") or request.form.get("schedule_id", "").strip()
        items = _due_times(view, spec, jitter, named or None)
        note = zone_note(spec.timezone)
    except (CalendarError, AlmanacError, ValueError) as exc:
        # Named by the fields' labels, as the form names them ("End at", not "end at").
        error = labelled(_errors_of(exc))
    return render(
        "schedules/_preview.html",
        "schedules/_preview.html",
        ns=view,
        items=items,
        error=error,
        zone_note=note,
    )
