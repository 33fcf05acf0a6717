"""The namespace overview, the landing page: is everything fine right now?

It refreshes itself every 10 s (the body only) and stops after an hour without a reload
(HTTP 286 tells htmx to stop polling), so a forgotten tab does not query forever.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Blueprint, current_app, request
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ
from app.console import errors
from app.console.charts import load_chart
from app.console.htmx import is_partial, render
from app.console.outcome_chart import outcome_chart
from app.console.session import namespace_view
from app.db import Namespace
from app.db.clock import wall_now
from app.errors import ValidationFailed
from app.runs import overview as runs_overview
from app.schedules import overview as schedules_overview
from app.schedules.upcoming import Upcoming, upcoming_load
from app.ticker.health import STALE_PERIODS, TickerState, ticker_state

bp = Blueprint("console_overview", __name__)
errors.register(bp)
POLL_FOR = timedelta(hours=1)
BUSIEST = 5
BUSIEST_FOR = timedelta(seconds=60)
DAY = timedelta(hours=24)


def _poll_expired(now: datetime) -> bool:
    """Whether the page this refresh belongs to was loaded more than `POLL_FOR` ago."""
    raw = request.args.get("since")
    if raw is None:
        return False
    # Named when unreadable, as every query argument a page cannot read (never a 500).
    refused = ValidationFailed(
        [{"loc": ["query", "since"], "msg": "must be the Unix time the page was loaded at"}]
    )
    since = inputs.ascii_int(raw)
    if since is None:
        raise refused
    try:
        loaded = datetime.fromtimestamp(since, UTC)
    except (OverflowError, ValueError, OSError):
        raise refused from None
    return now - loaded > POLL_FOR


@bp.get("/ns/<ns>/")
@login_required
def index(ns: str) -> Response:
    """Show the namespace at a glance: schedules, ticker, workers, runs, tasks, incidents."""
    view = namespace_view(ns, RUN_READ)
    session, now = context.session(), context.now()
    period = float(current_app.config["TICK_SECONDS"])
    # Ticker beats are real times, even on a manual clock, read on the clock they were written
    # with (the database's on PostgreSQL).
    wall = wall_now(session, current_app.config)
    ticker = ticker_state(session, wall, period)
    health = schedules_overview.schedule_health(
        session, view.current, now, timedelta(seconds=STALE_PERIODS * period)
    )
    hours = runs_overview.runs_per_hour(session, view.current, now)
    stopped = is_partial() and _poll_expired(now)
    chart = outcome_chart(hours)
    open_incidents = runs_overview.open_incident_count(session, view.current)
    waiting = runs_overview.waiting_for_workers(session, view.current, now)
    return render(
        "overview/index.html",
        "overview/_body.html",
        http_status=286 if stopped else 200,
        ns=view,
        now=now,
        since=int(now.timestamp()),
        stopped=stopped,
        health=health,
        ticker=ticker,
        wall_now=wall,
        stale_periods=STALE_PERIODS,
        chart=chart,
        attention=attention(
            health, ticker, open_incidents, chart.totals.get("failed", 0), waiting.count
        ),
        waiting=waiting,
        worker_wait_minutes=int(runs_overview.WORKER_WAIT.total_seconds() // 60),
        open_tasks=runs_overview.open_task_count(session, view.current),
        open_incidents=open_incidents,
        has_workflows=runs_overview.has_workflows(session, view.current),
    )


def attention(
    health: schedules_overview.ScheduleHealth,
    ticker: TickerState,
    incidents: int,
    failed: int,
    waiting: int = 0,
) -> list[tuple[str, str]]:
    """What is not fine, worst first, each with the id of the part of the page that shows it;
    empty when everything is: the page's first line answers "is everything fine?" from it."""
    found = []
    if ticker.last_tick_at is None or ticker.stale:
        found.append(("the ticker is not ticking", "t-ticker"))
    for count, one, many, where in (
        (health.overdue_count, "schedule overdue", "schedules overdue", "t-overdue"),
        (health.counts["blocked"], "schedule blocked", "schedules blocked", "t-blocked"),
        (
            health.held_count,
            "schedule held by the run limit",
            "schedules held by the run limit",
            "t-overdue",
        ),
        (
            waiting,
            "step waiting over a minute for a worker",
            "steps waiting over a minute for a worker",
            "t-workers",
        ),
        (incidents, "open incident", "open incidents", "t-work"),
        (failed, "run failed in the last 24 h", "runs failed in the last 24 h", "t-runs"),
    ):
        if count:
            found.append((f"{count} {one if count == 1 else many}", where))
    return found


def _upcoming(namespace: Namespace, now: datetime) -> tuple[list[tuple[datetime, int]], int]:
    """The namespace's weighted starts in the 24 h after `now`, and how many schedules were
    placed without jitter (`Upcoming.approximate`).

    Reading every active schedule's calendar costs ~100-250 ms at 100,000 schedules, so each
    process keeps the starts of a slightly longer window for `BUSIEST_FOR` (by the app's clock)
    and cuts the current 24 h out of it: a schedule saved meanwhile shows within that time.
    """
    cache: dict[int, tuple[datetime, Upcoming]] = current_app.extensions.setdefault(
        "almanac.busiest", {}
    )
    kept = cache.get(namespace.id)
    if kept is None or not kept[0] <= now < kept[0] + BUSIEST_FOR:
        hours = int((DAY + BUSIEST_FOR) / timedelta(hours=1)) + 1
        kept = (now, upcoming_load(context.session(), namespace, now, hours=hours))
        cache[namespace.id] = kept
    until = now + DAY
    return [(at, many) for at, many in kept[1].starts if now < at <= until], kept[1].approximate


@bp.get("/ns/<ns>/overview/busiest")
@login_required
def busiest(ns: str) -> Response:
    """The busiest 5-minute slots of the next 24 h; loaded after the overview (it reads every
    active schedule's calendar, each distinct one expanded once: app/schedules/upcoming.py)."""
    view = namespace_view(ns, RUN_READ)
    now = context.now()
    starts, approximate = _upcoming(view.current, now)
    chart = load_chart((), now, weighted=starts)
    slots = sorted(
        (bar for bar in chart.bars if bar.count), key=lambda bar: (-bar.count, bar.start)
    )
    return render(
        "overview/busiest.html",
        "overview/_busiest.html",
        ns=view,
        now=now,
        slots=slots[:BUSIEST],
        total=chart.total,
        approximate=approximate,
        fresh_for=int(BUSIEST_FOR.total_seconds()),
    )
