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

from app import context
from app.auth.grants import RUN_READ
from app.console import errors
from app.console.htmx import render
from app.console.session import namespace_view
from app.console.sim_chart import sim_chart
from app.db import Schedule
from app.schedules import simulate_start, store
from app.schedules.simulate import Result, simulate

bp = Blueprint("console_simulation", __name__)
errors.register(bp)
HORIZONS = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}
MAX_MINUTES = 7 * 24 * 60


def _minutes(raw: str) -> int | None:
    """The assumed run length in whole minutes, or None when it is not one we take."""
    try:
        minutes = int(raw.strip() or "0")
    except ValueError:
        return None
    return minutes if 0 <= minutes <= MAX_MINUTES else None


@bp.get("/ns/<ns>/schedules/<schedule_id>/simulate")
@login_required
def stored(ns: str, schedule_id: str) -> Response:
    """The simulation partial (htmx) or page: counts, a timeline, the first occurrences."""
    view = namespace_view(ns, RUN_READ)
    session, now = context.session(), context.now()
    schedule = store.get(session, view.current, schedule_id)
    horizon = request.args.get("horizon", "24h")
    horizon = horizon if horizon in HORIZONS else "24h"
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
    if minutes is None:
        error = f"Enter a whole number of minutes from 0 to {MAX_MINUTES}."
        return render(
            "schedules/simulation.html", "schedules/_simulation.html", 422, error=error, **ctx
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


def _simulate(schedule: Schedule, begin: datetime, end: datetime, minutes: int) -> Result:
    """As the API does: the window checked by its parser, then the pure simulation."""
    window = simulate_start.parse_window(
        {"from": begin.isoformat(), "to": end.isoformat(), "run_duration": f"PT{minutes}M"}
    )
    start = simulate_start.from_stored(context.session(), schedule)
    # Reads only: end the read transaction without committing anything.
    context.session().rollback()
    grace = timedelta(seconds=float(current_app.config["MISFIRE_GRACE_SECONDS"]))
    return simulate(start, (window.begin, window.end), window.run_duration, grace)


def _summary(result: Result | None) -> dict[str, int]:
    counts = {"started": 0, "buffered": 0, "skipped": 0}
    for item in result.items if result else []:
        counts[item.outcome] += 1
    return counts
