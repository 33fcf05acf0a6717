"""The simulation agrees with the ticker, as a property.

Random schedules (cron and intervals, time zones, jitter, every overlap and missed policy,
max_runs, calendars that end inside the window) are simulated, then driven through the manual
clock and the real tick phases by a ticker that never lags: it ticks at every due time and,
while an occurrence waits in the buffer, one tick period (a second) after every run end; the
test ends each run exactly `run_duration` after it started. What really
happened (the ledger, the runs and their ends) must be what the simulation said: the same
outcomes, reasons, run ids and instants.

Two simulations are checked per example: one of the stored schedule right after it was saved
(and of its save body, which must agree), and one from a checkpoint in the middle of the window,
taken from the stored state then (active runs, buffer, remaining runs). In some examples the
ticker is down until the checkpoint, so the checkpoint's first tick finds overdue occurrences
and the missed policy decides them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.calendar import Spec, format_utc, occurrences_between, parse_instant
from app.context import clock as app_clock
from app.context import database
from app.db import ACTIVE_RUN_STATUSES, Namespace, Run, Schedule, ScheduleOccurrence, User
from app.runs import lifecycle
from app.schedules import service
from app.schedules.audit import CommandContext
from app.schedules.tick import buffers, due

SPECS = [
    {"cron_expressions": ["*/10 * * * *"], "timezone": "UTC"},
    {"cron_expressions": ["*/7 * * * *"], "timezone": "America/New_York"},
    {"cron_expressions": ["5,20,21,50 * * * *"], "timezone": "Asia/Kolkata"},
    {"intervals": [{"every": "PT9M", "offset": "PT2M"}], "timezone": "Europe/Berlin"},
    {
        "cron_expressions": ["*/15 * * * *"],
        "intervals": [{"every": "PT11M"}],
        "timezone": "Australia/Lord_Howe",
    },
]
STARTS = ["2026-01-05T12:00:30Z", "2026-03-08T06:10:30Z", "2026-11-01T05:20:30Z"]
GRACE = timedelta(seconds=60)
TINY = timedelta(microseconds=1)
# The tick period the simulate routes assume (the default `ALMANAC_TICK_SECONDS`); every instant
# here falls on a whole second, so the tick after one is a second later.
PERIOD = timedelta(seconds=1)
BUDGET = 10.0**9

examples = st.fixed_dictionaries(
    {
        "spec": st.sampled_from(range(len(SPECS))),
        "start": st.sampled_from(range(len(STARTS))),
        "jitter_seconds": st.sampled_from([0, 0, 30, 200]),
        "missed_policy": st.sampled_from(["skip", "fire_once"]),
        "overlap_policy": st.sampled_from(
            ["skip", "buffer_one", "buffer_all", "allow_all", "cancel_other", "terminate_other"]
        ),
        "max_runs": st.sampled_from([None, 2, 4, 7]),
        "run_seconds": st.sampled_from([0, 420, 1500, 2400, 3900]),
        "hours": st.sampled_from([1, 2]),
        # The checkpoint, in minutes after the start (off the minute, like the start).
        "checkpoint": st.integers(min_value=1, max_value=55),
        "outage": st.booleans(),
        # A calendar that ends inside the window (minutes after the start), or never.
        "end_minutes": st.sampled_from([None, None, 25, 70]),
    }
)


@dataclass
class Example:
    schedule_id: str
    begin: datetime
    end: datetime
    duration: timedelta
    spec: Spec


class Driver:
    """The app's database, its manual clock, the tick phases and the simulate routes."""

    def __init__(self, app, api) -> None:
        self.app, self.api, self.db = app, api, database(app)

    def set_clock(self, instant: datetime) -> None:
        with self.db.session() as session:
            app_clock(self.app).set(session, instant)
            session.commit()

    def save(self, now: datetime, body: dict[str, Any]) -> None:
        with self.db.session() as session:
            namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
            user = session.scalar(select(User).where(User.username == "olga"))
            context = CommandContext("olga", "api")
            service.save(session, now, namespace, user, context, body, None)
            session.commit()

    def simulate(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.api.post(path, json=body)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def schedule(self, schedule_id: str) -> Schedule:
        with self.db.session() as session:
            row = session.scalar(select(Schedule).where(Schedule.schedule_id == schedule_id))
            session.expunge(row)
            return row

    def runs(self, ex: Example) -> list[Run]:
        with self.db.session() as session:
            query = select(Run).where(Run.schedule_id == ex.schedule_id).order_by(Run.id)
            rows = list(session.scalars(query))
            session.expunge_all()
            return rows

    def end_runs(self, ex: Example, now: datetime) -> None:
        """End every run whose time is up, at the exact instant it was due to end."""
        with self.db.session() as session:
            query = select(Run).where(
                Run.schedule_id == ex.schedule_id, Run.status.in_(ACTIVE_RUN_STATUSES)
            )
            for run in session.scalars(query):
                if run.created_at + ex.duration <= now:
                    ends = run.created_at + ex.duration
                    lifecycle.finish_run(session, run, ends, "completed", "run_completed", {})
            session.commit()

    def tick(self, ex: Example, now: datetime) -> None:
        """The real phases in the ticker's order. Runs that ended before this tick are over; a
        run ending at this instant ends in the deadline phase, after the buffers drained (as a
        wait or a timeout does). The buffer it frees drains at the next tick."""
        self.set_clock(now)
        self.end_runs(ex, now - TINY)
        buffers.drain(self.db, now, budget_deadline=BUDGET)
        self.end_runs(ex, now)
        due.fire_due(self.db, now, GRACE, budget_deadline=BUDGET)

    def next_tick(self, ex: Example, last: datetime) -> datetime | None:
        """A ticker that never lags: the next due time, or, while the buffer waits, the tick
        after the earliest run end (after `last`, the last tick, when no run is active)."""
        schedule = self.schedule(ex.schedule_id)
        candidates = []
        if schedule.status == "active" and schedule.next_fire_at is not None:
            candidates.append(schedule.next_fire_at)
        if schedule.status == "active" and schedule.buffered_count:
            ends = [
                run.created_at + ex.duration
                for run in self.runs(ex)
                if run.status in ACTIVE_RUN_STATUSES
            ]
            candidates.append(min(ends, default=last) + PERIOD)
        return min(candidates, default=None)


def run_example(driver: Driver, activation: str, config: dict[str, Any], number: int) -> None:
    begin = parse_instant(STARTS[config["start"]])
    spec = SPECS[config["spec"]]
    if config["end_minutes"] is not None:
        spec = spec | {"end_at": format_utc(begin + timedelta(minutes=config["end_minutes"]))}
    ex = Example(
        f"sim-{number}",
        begin,
        begin + timedelta(hours=config["hours"]),
        timedelta(seconds=config["run_seconds"]),
        Spec.from_dict(spec),
    )
    checkpoint = begin + timedelta(minutes=config["checkpoint"], seconds=17)
    body = {
        "id": ex.schedule_id,
        "spec": spec,
        "activation_id": activation,
        "input": {},
        **{k: config[k] for k in ("jitter_seconds", "missed_policy", "overlap_policy")},
        "max_runs": config["max_runs"],
    }
    window = {"to": format_utc(ex.end), "run_duration": f"PT{config['run_seconds']}S"}
    driver.set_clock(begin)
    driver.save(begin, body)
    path = f"/schedules/{ex.schedule_id}/simulate"
    whole = driver.simulate(path, window | {"from": format_utc(begin)})
    from_body = driver.simulate("/schedules/simulate", body | window | {"from": format_utc(begin)})
    assert from_body == whole
    later: dict[str, Any] | None = None
    now = begin
    while True:
        upcoming = driver.next_tick(ex, now)
        if later is None and (upcoming is None or upcoming >= checkpoint or config["outage"]):
            # The checkpoint: simulate from the stored state as it is, then tick there too.
            driver.end_runs(ex, checkpoint)
            later = driver.simulate(path, window | {"from": format_utc(checkpoint)})
            upcoming = checkpoint
        if upcoming is None or upcoming >= ex.end:
            break
        assert upcoming >= now
        now = upcoming
        driver.tick(ex, now)
    driver.end_runs(ex, ex.end - TINY)
    assert later is not None
    check(driver, ex, later, since=checkpoint)
    if not config["outage"]:
        check(driver, ex, whole, since=begin)
    finish(driver, ex)


def ledger(driver: Driver, ex: Example) -> dict[datetime, tuple[tuple[Any, ...], datetime]]:
    """Every canonical instant the ledger accounts for: (kind, reason, run id), observed at."""
    with driver.db.session() as session:
        schedule = session.scalar(select(Schedule).where(Schedule.schedule_id == ex.schedule_id))
        rows = session.scalars(
            select(ScheduleOccurrence).where(ScheduleOccurrence.schedule_pk == schedule.id)
        )
        found: dict[datetime, tuple[tuple[Any, ...], datetime]] = {}
        for row in rows:
            assert row.origin == "scheduled"
            if row.kind == "skipped":
                for instant in occurrences_between(ex.spec, row.instant - TINY, row.through):
                    assert instant not in found
                    found[instant] = (("skipped", row.reason, None), row.observed_at)
            else:
                assert row.instant not in found
                found[row.instant] = ((row.kind, None, row.run_id), row.observed_at)
        return found


def expected(item: dict[str, Any]) -> tuple[Any, ...]:
    """The ledger entry a simulated item predicts (a buffered one that drained is `started`)."""
    if item["outcome"] == "skipped":
        return ("skipped", item["reason"], None)
    if item["outcome"] == "buffered" and item["starts_at"] is None:
        return ("buffered", None, None)
    return ("started", None, item["run_id"])


def check(driver: Driver, ex: Example, result: dict[str, Any], since: datetime) -> None:
    assert result["truncated"] is False
    items = result["items"]
    found = ledger(driver, ex)
    predicted = {parse_instant(item["occurrence_time"]): expected(item) for item in items}
    assert len(predicted) == len(items)
    # Everything the ticker decided from `since` on was predicted, and as it happened.
    decided = {instant for instant, (_, observed) in found.items() if observed >= since}
    assert sorted(decided - set(predicted)) == []
    actual = {instant: found[instant][0] if instant in found else None for instant in predicted}
    assert actual == predicted
    runs = {run.run_id: run for run in driver.runs(ex)}
    for item in items:
        if item["run_id"] is None:
            continue
        run = runs[item["run_id"]]
        assert format_utc(run.created_at) == item["starts_at"]
        ends_at = parse_instant(item["ends_at"])
        if ends_at < ex.end:
            assert run.finished_at == ends_at, item
        else:
            assert run.status in ACTIVE_RUN_STATUSES
        for ended in item["ends_runs"]:
            assert runs[ended].status in ("cancelled", "terminated")
            assert format_utc(runs[ended].finished_at) == item["starts_at"]
    started = {run_id for run_id, run in runs.items() if since <= run.created_at < ex.end}
    assert started == {item["run_id"] for item in items if item["run_id"]}


def finish(driver: Driver, ex: Example) -> None:
    """Leave nothing behind for the next example: end runs and delete the schedule."""
    driver.end_runs(ex, ex.end + timedelta(days=30))
    with driver.db.session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        user = session.scalar(select(User).where(User.username == "olga"))
        schedule = session.scalar(select(Schedule).where(Schedule.schedule_id == ex.schedule_id))
        if schedule.status != "deleted":
            context = CommandContext("olga", "api")
            service.delete(
                session, ex.end, namespace, user, context, ex.schedule_id, schedule.revision
            )
        session.commit()


@pytest.fixture
def setup(app, h):
    return Driver(app, h.api), h.workflow()


def test_the_simulation_predicts_what_the_ticker_does(setup):
    driver, activation = setup
    counter = iter(range(10**6))

    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(config=examples)
    def run(config):
        run_example(driver, activation, config, next(counter))

    run()
