"""Schedules pages: the list (live refresh), the detail page and the history modal."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from flask import Blueprint, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context
from app.auth.grants import RUN_READ
from app.calendar import Spec, describe_spec
from app.console import errors
from app.console.charts import timeline
from app.console.common import next_cursor, one_arg, page_key
from app.console.htmx import render
from app.console.session import namespace_view
from app.db import Schedule
from app.errors import ValidationFailed
from app.runs import overview as runs_overview
from app.runs import service as runs_service
from app.schedules import queries, store
from app.schedules.config import label_pair
from app.schedules.transitions import draining_last

bp = Blueprint("console_schedules", __name__)
errors.register(bp)
HISTORY_PAGE = 100


def typed_labels() -> list[str]:
    """The `label` arguments, one label each as the API reads them (a value may hold commas);
    an empty one (the form's box for one more label) is absent."""
    return [raw for raw in request.args.getlist("label") if raw.strip()]


def _filters() -> queries.ScheduleFilter:
    """The list's filters, every label to match; a label it cannot read, or a status or text
    given twice, is refused (422 naming it), never ignored."""
    labels = [label_pair(raw) for raw in typed_labels()]
    status = one_arg("status") or None
    return queries.ScheduleFilter(
        status=status,
        labels=tuple(labels),
        text=(one_arg("q") or "").strip()[:128] or None,
        include_deleted=status == "deleted",
    )


def calendar_text(schedule: Schedule) -> str:
    return _describe(json.dumps(schedule.spec, sort_keys=True))


@lru_cache(maxsize=2048)
def _describe(spec_json: str) -> str:
    # The list refreshes every few seconds and a spec may hold 64 calendars and intervals:
    # describe each distinct spec once, not on every render.
    return describe_spec(Spec.from_dict(json.loads(spec_json)))


FILTER_ARGS = ("status", "label", "q")
FILTER_NAMES = {"status": "Status filter", "label": "Label filter", "q": "Search"}


@bp.get("/ns/<ns>/schedules")
@login_required
def index(ns: str) -> Response:
    """List the namespace's schedules with filters and keyset pagination."""
    view = namespace_view(ns, RUN_READ)
    # The list's own filters: its cursor is bound to them, and its links carry them.
    listed = _args(*FILTER_ARGS)
    key = page_key(ns, "schedules", listed)
    after = int(key[0]) if key and isinstance(key[0], int) else None
    session = context.session()
    rows: list[Schedule] = []
    next_url, filter_error, refused = None, None, None
    # The live refresh asks for what this page shows: the submitted filters and its page, never
    # what is being typed into the filter form (a cursor belongs to the filter it was made with).
    shown = _args(*FILTER_ARGS, "cursor")
    refresh_url = url_for(".index", ns=ns, **shown)
    try:
        filters = _filters()
    except ValidationFailed as exc:
        error = exc.details["errors"][0]
        filter_error, refused = error["msg"], str(error["loc"][-1])
    else:
        rows, next_key = queries.list_schedules(session, view.current, filters, 50, after)
        cursor = next_cursor(ns, "schedules", [next_key] if next_key else None, listed)
        # Only the list's own filters go into the link: a stray `ns` or `_external` query
        # argument must not reach url_for (it would clash with the route, or make an absolute URL).
        args = listed | {"cursor": cursor}
        next_url = url_for(".index", ns=ns, **args) if cursor else None
    return render(
        "schedules/index.html",
        "schedules/_rows.html",
        422 if filter_error else 200,
        filter_error=filter_error,
        # The filter the error is about (`status`, `label` or `q`): named in the message, and
        # its box does not pretend a value was read.
        refused=refused,
        filter_name=FILTER_NAMES.get(refused or "", "Filter"),
        ns=view,
        schedules=rows,
        last_runs=runs_overview.latest_runs(session, [row.uid for row in rows]),
        now=context.now(),
        next_url=next_url,
        refresh_url=refresh_url,
        calendar_text=calendar_text,
        args=request.args,
        # One box per label filtered on, and an empty one to add a label.
        label_boxes=[*typed_labels(), ""],
        bad_labels=[raw for raw in typed_labels() if _unreadable(raw)],
    )


def _args(*names: str) -> dict[str, Any]:
    """The query arguments `names` with every value each has (`label` repeats)."""
    return {name: request.args.getlist(name) for name in request.args if name in names}


def _unreadable(raw: str) -> bool:
    try:
        label_pair(raw)
    except ValidationFailed:
        return True
    return False


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
        draining=draining_last(schedule),
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
    latest = request.args.get("latest") == "1"
    after = queries.parse_after_sequence(request.args.get("after_sequence"))
    if latest:
        # The last page, still read forward from an after_sequence like every other page.
        after = max(0, schedule.history_sequence - HISTORY_PAGE)
    page = queries.history(session, view.current, schedule, HISTORY_PAGE, after)
    partial = "schedules/_history_page.html" if after and not latest else "schedules/_history.html"
    return render(
        "schedules/history.html",
        partial,
        ns=view,
        schedule=schedule,
        page=page,
        now=context.now(),
        latest=latest,
    )
