"""The ledger invariant as a property: every canonical occurrence of every active period
is accounted for exactly once, and no run is started twice.

Random schedules (cron and intervals, several time zones, jitter, every policy) are driven by the
manual clock through random ticks, pauses, resumes, updates, finished runs, and clock jumps
forward and backward. Where the clock went backward, the edge of a period is only known to lie
between the change and the furthest instant the clock had reached: occurrences there must be
accounted for at most once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.calendar import Spec, occurrences_between, parse_instant
from app.context import clock as app_clock
from app.context import database
from app.db import (
    Namespace,
    Run,
    RunHistoryEvent,
    Schedule,
    ScheduleOccurrence,
    ScheduleRevision,
    User,
)
from app.runs import lifecycle
from app.schedules import service
from app.schedules.audit import CommandContext
from app.schedules.tick import buffers, due
from tests.support.schedules_harness import Harness

SPECS = [
    {"cron_expressions": ["*/5 * * * *"], "timezone": "UTC"},
    {"cron_expressions": ["*/7 * * * *"], "timezone": "America/New_York"},
    {"cron_expressions": ["15,45 * * * *"], "timezone": "Asia/Kolkata"},
    {"cron_expressions": ["30 1,2,3 * * *"], "timezone": "America/New_York"},
    {"intervals": [{"every": "PT4M", "offset": "PT1M"}], "timezone": "Europe/Berlin"},
    {
        "cron_expressions": ["*/10 * * * *"],
        "intervals": [{"every": "PT6M"}],
        "timezone": "Australia/Lord_Howe",
    },
]
STARTS = ["2026-01-05T12:00:00Z", "2026-03-08T05:40:00Z", "2026-11-01T04:40:00Z"]
GRACE = timedelta(seconds=60)
TINY = timedelta(microseconds=1)

schedules_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "spec": st.sampled_from(range(len(SPECS))),
            "jitter_seconds": st.sampled_from([0, 0, 45, 200]),
            "missed_policy": st.sampled_from(["skip", "fire_once"]),
            "overlap_policy": st.sampled_from(
                ["skip", "buffer_one", "buffer_all", "allow_all", "cancel_other", "terminate_other"]
            ),
        }
    ),
    min_size=1,
    max_size=2,
)
steps_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.sampled_from([30, 60, 90, 200, 300, 420, 600])),
        st.tuples(st.just("tick"), st.integers(min_value=-900, max_value=3 * 3600)),
        st.tuples(st.just("finish"), st.just(0)),
        st.tuples(st.just("pause"), st.integers(0, 1)),
        st.tuples(st.just("resume"), st.integers(0, 1)),
        st.tuples(st.just("update"), st.integers(0, 2 * len(SPECS) - 1)),
        # Pause, move the clock back ten minutes, resume: the cursor must hold its ground.
        st.tuples(st.just("rewind"), st.integers(0, 1)),
    ),
    min_size=5,
    max_size=28,
)


@dataclass
class Period:
    spec: dict
    start: datetime
    start_high: datetime
    end: datetime | None = None
    end_high: datetime | None = None


@dataclass
class Tracked:
    schedule_id: str
    spec: dict
    periods: list[Period] = field(default_factory=list)
    active: bool = True


class Driver:
    """Runs one example against the app's database through the services and tick phases."""

    def __init__(self, app, start: int) -> None:
        self.app = app
        self.db = database(app)
        self.now = self.high = parse_instant(STARTS[start])
        self.set_clock(self.now)

    def set_clock(self, instant: datetime) -> None:
        self.now = instant
        self.high = max(self.high, instant)
        with self.db.session() as session:
            app_clock(self.app).set(session, instant)
            session.commit()

    def call(self, function, *args):
        with self.db.session() as session:
            namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
            user = session.scalar(select(User).where(User.username == "olga"))
            result = function(
                session, self.now, namespace, user, CommandContext("olga", "api"), *args
            )
            session.commit()
            return result

    def tick(self) -> None:
        budget = 10**9
        buffers.drain(self.db, self.now, budget_deadline=budget)
        due.fire_due(self.db, self.now, GRACE, budget_deadline=budget)

    def finish_runs(self) -> None:
        with self.db.session() as session:
            for run in session.scalars(
                select(Run).where(Run.status.in_(("pending", "running", "waiting")))
            ):
                lifecycle.finish_run(session, run, self.now, "completed", "run_completed", {})
            session.commit()

    def revision(self, schedule_id: str) -> tuple[int, str]:
        with self.db.session() as session:
            row = session.execute(
                select(Schedule.revision, Schedule.status).where(
                    Schedule.schedule_id == schedule_id
                )
            ).one()
            return row[0], row[1]


def run_example(app, activation, configs, steps, start, example):
    driver = Driver(app, start)
    tracked = []
    for index, config in enumerate(configs):
        schedule_id = f"p{example}-{index}"
        body = {
            "id": schedule_id,
            "spec": SPECS[config["spec"]],
            "activation_id": activation,
            **{k: v for k, v in config.items() if k != "spec"},
        }
        driver.call(service.save, body, None)
        item = Tracked(schedule_id, SPECS[config["spec"]])
        item.periods.append(Period(SPECS[config["spec"]], driver.now, driver.high))
        tracked.append(item)
    for kind, value in steps:
        if kind == "tick":
            driver.set_clock(driver.now + timedelta(seconds=value))
            driver.tick()
        elif kind == "finish":
            driver.finish_runs()
        elif kind == "rewind":
            if value >= len(tracked):
                continue
            item = tracked[value]
            revision, current = driver.revision(item.schedule_id)
            if current != "active":
                continue
            driver.call(service.pause, item.schedule_id, revision)
            close(item, driver)
            driver.set_clock(driver.now - timedelta(minutes=10))
            driver.call(service.resume, item.schedule_id, revision + 1)
            item.active = True
            item.periods.append(Period(item.spec, driver.now, driver.high))
        elif kind in ("pause", "resume"):
            if value >= len(tracked):
                continue
            item = tracked[value]
            revision, current = driver.revision(item.schedule_id)
            function = service.pause if kind == "pause" else service.resume
            driver.call(function, item.schedule_id, revision)
            if kind == "pause" and current == "active":
                close(item, driver)
            elif kind == "resume" and current == "paused":
                item.active = True
                item.periods.append(Period(item.spec, driver.now, driver.high))
        else:
            item = tracked[value % len(tracked)]
            spec = SPECS[value // 2 % len(SPECS)]
            revision, current = driver.revision(item.schedule_id)
            # A merge patch: name every spec field so the new spec replaces the old one.
            patch = dict.fromkeys(("cron_expressions", "intervals", "timezone")) | spec
            driver.call(service.patch, item.schedule_id, {"spec": patch}, revision)
            changed = Spec.from_dict(spec) != Spec.from_dict(item.spec)
            item.spec = spec
            if current == "active" and changed:
                # The old calendar's period ends now; the new one starts from now on.
                close(item, driver)
                item.active = True
                item.periods.append(Period(spec, driver.now, driver.high))
    # Settle: move past everything and tick, so every due occurrence has been observed.
    driver.set_clock(driver.high + timedelta(minutes=30))
    driver.tick()
    for item in tracked:
        check(driver, item)
        revision, current = driver.revision(item.schedule_id)
        driver.call(service.delete, item.schedule_id, revision)


def close(item: Tracked, driver: Driver) -> None:
    period = item.periods[-1]
    period.end, period.end_high = driver.now, driver.high
    item.active = False


def canonical(spec: dict, low: datetime, high: datetime) -> list[datetime]:
    return list(occurrences_between(Spec.from_dict(spec), low, high)) if high > low else []


def check(driver: Driver, item: Tracked) -> None:
    with driver.db.session() as session:
        schedule = session.scalar(select(Schedule).where(Schedule.schedule_id == item.schedule_id))
        specs = {
            r.revision: r.config["spec"]
            for r in session.scalars(
                select(ScheduleRevision).where(ScheduleRevision.schedule_pk == schedule.id)
            )
        }
        rows = list(
            session.scalars(
                select(ScheduleOccurrence).where(
                    ScheduleOccurrence.schedule_pk == schedule.id,
                    ScheduleOccurrence.origin == "scheduled",
                )
            )
        )
        runs = list(session.scalars(select(Run).where(Run.schedule_uid == schedule.uid)))
        first_events = {
            run.run_id: session.scalar(
                select(RunHistoryEvent.event_type).where(
                    RunHistoryEvent.run_pk == run.id, RunHistoryEvent.sequence == 1
                )
            )
            for run in runs
        }
    accounted: Counter[datetime] = Counter()
    for row in rows:
        if row.kind == "skipped":
            instants = canonical(specs[row.revision], row.instant - TINY, row.through)
            assert len(instants) == row.count, (row.instant, row.through, row.count)
            accounted.update(instants)
        else:
            accounted[row.instant] += 1
    settle_end = driver.now
    exact: set[datetime] = set()
    allowed: set[datetime] = set()
    for period in item.periods:
        end = period.end if period.end is not None else settle_end - timedelta(minutes=5)
        end_high = period.end_high if period.end is not None else settle_end
        exact_low = max(period.start, period.start_high)
        exact.update(canonical(period.spec, exact_low, end))
        allowed.update(canonical(period.spec, period.start, max(end, end_high)))
    duplicates = {t: n for t, n in accounted.items() if n > 1}
    assert not duplicates, f"accounted more than once: {duplicates}"
    missing = sorted(exact - set(accounted))
    assert not missing, f"never accounted for: {missing[:5]}"
    stray = sorted(set(accounted) - allowed)
    assert not stray, f"accounted outside any active period: {stray[:5]}"
    started = [row.run_id for row in rows if row.kind == "started"]
    assert len(started) == len(set(started))
    scheduled_runs = sorted(
        run.run_id
        for run in runs
        if ":manual:" not in run.run_id and ":backfill:" not in run.run_id
    )
    assert scheduled_runs == sorted(started)
    assert all(event == "ScheduleTriggered" for event in first_events.values())


@pytest.fixture
def setup(app, accounts):
    accounts.create("olga", "operator")
    return Harness(app, None).workflow()  # type: ignore[arg-type]


def test_every_occurrence_of_every_active_period_is_accounted_for_exactly_once(app, setup):
    counter = iter(range(10**6))

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        configs=schedules_strategy, steps=steps_strategy, start=st.sampled_from(range(len(STARTS)))
    )
    def run(configs, steps, start):
        run_example(app, setup, configs, steps, start, next(counter))

    run()
