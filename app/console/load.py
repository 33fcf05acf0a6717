"""The namespace load chart: runs starting per 5 minutes over the next 24 hours."""

from __future__ import annotations

from flask import Blueprint
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context
from app.auth.grants import RUN_READ
from app.console import errors
from app.console.charts import load_chart
from app.console.htmx import render
from app.console.session import namespace_view
from app.schedules.upcoming import upcoming_load

bp = Blueprint("console_load", __name__)
errors.register(bp)


@bp.get("/ns/<ns>/load")
@login_required
def index(ns: str) -> Response:
    """Show when this namespace's schedules will start runs over the next day."""
    view = namespace_view(ns, RUN_READ)
    now = context.now()
    upcoming = upcoming_load(context.session(), view.current, now)
    chart = load_chart((), now, weighted=upcoming.starts)
    busiest = sorted((bar for bar in chart.bars if bar.busiest), key=lambda b: -b.count)[:5]
    return render(
        "load/index.html",
        "load/index.html",
        ns=view,
        chart=chart,
        busiest=busiest,
        now=now,
        approximate=upcoming.approximate,
    )
