"""Schedules pages: the list (live refresh), the detail page and the history modal."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context
from app.auth.grants import RUN_READ
from app.calendar import Spec, describe_spec
from app.console import errors
from app.console.charts import timeline
from app.console.common import next_cursor, page_key
from app.console.htmx import render
from app.console.session import namespace_view
from app.db import Schedule
from app.runs import overview as runs_overview
from app.runs import service as runs_service
from app.schedules import queries, store

bp = Blueprint("console_schedules", __name__)
errors.register(bp)
HISTORY_PAGE = 100


def _filters() -> queries.ScheduleFilter:
    labels = []
    for raw in request.args.get("label", "").split(","):
        key, sep, value = raw.strip().partition(":")
        if sep and key:
            labels.append((key, value))
    return queries.ScheduleFilter(
        status=request.args.get("status") or None,
        labels=tuple(labels),
        text=request.args.get("q", "").strip()[:128] or None,
        include_deleted=request.args.get("status") == "deleted",
    )


def calendar_text(schedule: Schedule) -> str:
    return describe_spec(Spec.from_dict(schedule.spec))


@bp.get("/ns/<ns>/schedules")
@login_required
def index(ns: str) -> Response:
    """List the namespace's schedules with filters and keyset pagination."""
    view = namespace_view(ns, RUN_READ)
    key = page_key(ns, "schedules")
    after = int(key[0]) if key and isinstance(key[0], int) else None
    session = context.session()
    rows, next_key = queries.list_schedules(session, view.current, _filters(), 50, after)
    cursor = next_cursor(ns, "schedules", [next_key] if next_key else None)
    args: dict[str, Any] = request.args.to_dict() | {"cursor": cursor}
    next_url = url_for(".index", ns=ns, **args) if cursor else None
    return render(
        "schedules/index.html",
        "schedules/_rows.html",
        ns=view,
        schedules=rows,
        last_runs=runs_overview.latest_runs(session, [row.uid for row in rows]),
        now=context.now(),
        next_url=next_url,
        calendar_text=calendar_text,
        args=request.args,
    )


@bp.get("/ns/<ns>/schedules/<schedule_id>")
@login_required
def detail(ns: str, schedule_id: str) -> Response:
    """Show a schedule: configuration, upcoming fires, ledger, recent runs and a timeline."""
    view = namespace_view(ns, RUN_READ)
    session, now = context.session(), context.now()
    schedule = store.get(session, view.current, schedule_id)
    upcoming = queries.upcoming_items(schedule, 20)
    line = (
        timeline(
            [(item.at, item.note) for item in upcoming], now, upcoming[-1].at if upcoming else now
        )
        if upcoming
        else None
    )
    ledger, _ = queries.occurrences(session, schedule, 50, None)
    runs, _ = runs_service.list_runs(
        session, view.current, 20, None, runs_service.RunFilter(schedule_id=schedule.schedule_id)
    )
    resource = queries.resources(session, view.current, [schedule])[0]
    return render(
        "schedules/detail.html",
        "schedules/_detail_body.html",
        ns=view,
        schedule=schedule,
        resource=resource,
        upcoming=upcoming[:10],
        timeline=line,
        ledger=ledger,
        runs=runs,
        now=now,
        calendar=calendar_text(schedule),
    )


@bp.get("/ns/<ns>/schedules/<schedule_id>/history")
@login_required
def history(ns: str, schedule_id: str) -> Response:
    """One page of the audit stream: the modal's body, or a `Load more` page appended to it."""
    view = namespace_view(ns, RUN_READ)
    session = context.session()
    schedule = store.get(session, view.current, schedule_id)
    after = queries.parse_after_sequence(request.args.get("after_sequence"))
    page = queries.history(session, view.current, schedule, HISTORY_PAGE, after)
    partial = "schedules/_history_page.html" if after else "schedules/_history.html"
    return render(
        "schedules/history.html", partial, ns=view, schedule=schedule, page=page, now=context.now()
    )
