"""What a stored schedule would do over the next 24 hours or 7 days, for an assumed run length.

The same simulation as the API's (app/api/simulate.py): the stored schedule's state, the
ticker's own decisions, nothing written. The schedule page loads it as an htmx partial and
reloads it as the inputs change; without script the form opens it as a page.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from flask import Blueprint, current_app, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ
from app.calendar import CalendarError, Spec, SpecRangeError
from app.console import errors
from app.console.forms import (
    errors_of,
    form_errors,
    labelled,
    request_from_form,
    spec_from_form,
)
from app.console.htmx import render
from app.console.schedule_forms import DELETED_ID, TAKEN_ID
from app.console.session import NamespaceView, namespace_view
from app.console.sim_chart import sim_chart
from app.db import Schedule
from app.errors import AlmanacError
from app.schedules import simulate_start, store
from app.schedules.simulate import Result, Start, simulate

bp = Blueprint("console_simulation", __name__)
errors.register(bp)
HORIZONS = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}
MAX_MINUTES = 7 * 24 * 60


def _minutes(raw: str) -> int | None:
    """The assumed run length in whole minutes, or None when it is not one we take."""
    minutes = inputs.ascii_int(raw.strip() or "0")
    return minutes if minutes is not None and minutes <= MAX_MINUTES else None


@bp.get("/ns/<ns>/schedules/<schedule_id>/simulate")
@login_required
def stored(ns: str, schedule_id: str) -> Response:
    """The simulation partial (htmx) or page: counts, a timeline, the first occurrences."""
    view = namespace_view(ns, RUN_READ)
    session, now = context.session(), context.now()
    schedule = store.get(session, view.current, schedule_id)
    horizon = request.args.get("horizon") or "24h"
    raw = request.args.get("minutes", "0")
    minutes = _minutes(raw)
    ctx: dict[str, Any] = {
        "ns": view,
        "schedule": schedule,
        "horizon": horizon,
        "minutes": raw,
        "sim_url": url_for(".stored", ns=ns, schedule_id=schedule_id),
        "now": now,
    }
    if horizon not in HORIZONS or minutes is None:
        return render(
            "schedules/simulation.html",
            "schedules/_simulation.html",
            422,
            error=_refusal(horizon),
            **ctx,
        )
    begin, end = now, now + HORIZONS[horizon]
    result = _simulate(schedule, begin, end, minutes) if schedule.status != "deleted" else None
    chart = sim_chart(result.items, begin, end) if result else None
    return render(
        "schedules/simulation.html",
        "schedules/_simulation.html",
        result=result,
        summary=_summary(result),
        chart=chart,
        begin=begin,
        end=end,
        **ctx,
    )


@bp.post("/ns/<ns>/schedules/simulate-form")
@login_required
def from_form(ns: str) -> Response:
    """The schedule form's panel: what the form as typed would do if saved now (htmx, debounced).

    `?schedule_id=` names the schedule being edited, so its jitter is its own."""
    view = namespace_view(ns, RUN_READ)
    session, now = context.session(), context.now()
    horizon = request.form.get("sim_horizon", "24h")
    horizon = horizon if horizon in HORIZONS else "24h"
    minutes = _minutes(request.form.get("sim_minutes", "0"))
    ctx: dict[str, Any] = {"ns": view, "schedule": None, "now": now, "live": True}
    if minutes is None:
        error = f"Enter a whole number of minutes from 0 to {MAX_MINUTES}."
        return render(
            "schedules/_simulation.html", "schedules/_simulation.html", error=error, **ctx
        )
    if not any(request.form.get(name, "").strip() for name in ("cron_expressions", "intervals")):
        # Nothing typed yet is not a mistake (as in the calendar preview).
        return render("schedules/_simulation.html", "schedules/_simulation.html", hint=True, **ctx)
    begin, end = now, now + HORIZONS[horizon]
    editing = request.args.get("schedule_id") or None
    stored = _stored_config(view, editing)
    # The fields are checked as Save checks them, and named as the form names them (its
    # labels and words, never the API's `end_at`): the panel sits under the same form.
    mistakes = form_errors(request.form, stored, now)
    try:
        if not editing:
            mistakes |= _id_taken(view, request.form.get("schedule_id", "").strip())
        if mistakes:
            raise _NotValid(mistakes)
        body = request_from_form(request.form, stored)
        if editing:
            body["schedule_id"] = editing
        start = simulate_start.from_body(session, now, view.current, body, begin)
        result = _run(start, begin, end, minutes)
    except SpecRangeError as exc:
        session.rollback()
        if stored is not None and _keeps_calendar(stored):
            # An edit that keeps a calendar with nothing ahead saves (the save does not refuse
            # it): it would fire nothing, which is not a mistake in the form.
            return render(
                "schedules/_simulation.html", "schedules/_simulation.html", ended=True, **ctx
            )
        return _not_valid(errors_of(exc, request.form), ctx)
    except (_NotValid, AlmanacError, CalendarError) as exc:
        session.rollback()
        return _not_valid(
            exc.errors if isinstance(exc, _NotValid) else errors_of(exc, request.form), ctx
        )
    return render(
        "schedules/_simulation.html",
        "schedules/_simulation.html",
        result=result,
        summary=_summary(result),
        chart=sim_chart(result.items, begin, end),
        begin=begin,
        end=end,
        **ctx,
    )


class _NotValid(Exception):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__()
        self.errors = errors


def _not_valid(errors: dict[str, str], ctx: dict[str, Any]) -> Response:
    """The form could not be saved as typed: say why, field by field, instead of counts."""
    return render(
        "schedules/_simulation.html", "schedules/_simulation.html", refusals=labelled(errors), **ctx
    )


def _stored_config(view: NamespaceView, schedule_id: str | None) -> dict[str, Any] | None:
    """The configuration the edit form was loaded from (the fields it sent back untouched keep
    their stored values, as on Save); None for a new schedule, or one gone meanwhile."""
    if not schedule_id:
        return None
    schedule = store.find(context.session(), view.current, schedule_id)
    if schedule is None or schedule.status == "deleted":
        return None
    return store.config_of(schedule).to_json()


def _keeps_calendar(stored: dict[str, Any]) -> bool:
    """Whether the edit form's calendar fires as the stored one does (respelled, or untouched)."""
    try:
        typed = Spec.from_dict(spec_from_form(request.form)).to_dict()
        return bool(typed == Spec.from_dict(stored["spec"]).to_dict())
    except (CalendarError, AlmanacError, ValueError):
        return False


def _id_taken(view: NamespaceView, schedule_id: str) -> dict[str, str]:
    """A new schedule's id that Save would refuse (taken, or a deleted schedule's), said as the
    form says it; the API's simulation would read it as a replacement of that schedule."""
    existing = store.find(context.session(), view.current, schedule_id) if schedule_id else None
    if existing is None:
        return {}
    return {"schedule_id": DELETED_ID if existing.status == "deleted" else TAKEN_ID}


def _refusal(horizon: str) -> str:
    """Why the panel cannot simulate its inputs, named in place: the horizon, else the minutes."""
    if horizon not in HORIZONS:
        return f"horizon: choose {' or '.join(HORIZONS)}."
    return f"Enter a whole number of minutes from 0 to {MAX_MINUTES}."


def _simulate(schedule: Schedule, begin: datetime, end: datetime, minutes: int) -> Result:
    return _run(simulate_start.from_stored(context.session(), schedule), begin, end, minutes)


def _run(start: Start, begin: datetime, end: datetime, minutes: int) -> Result:
    """As the API does: the window checked by its parser, then the pure simulation."""
    window = simulate_start.parse_window(
        {"from": begin.isoformat(), "to": end.isoformat(), "run_duration": f"PT{minutes}M"}
    )
    # Reads only: end the read transaction without committing anything.
    context.session().rollback()
    grace = timedelta(seconds=float(current_app.config["MISFIRE_GRACE_SECONDS"]))
    period = timedelta(seconds=float(current_app.config["TICK_SECONDS"]))
    return simulate(start, (window.begin, window.end), window.run_duration, grace, period)


def _summary(result: Result | None) -> dict[str, int]:
    counts = {"started": 0, "buffered": 0, "skipped": 0}
    for item in result.items if result else []:
        counts[item.outcome] += 1
    return counts
