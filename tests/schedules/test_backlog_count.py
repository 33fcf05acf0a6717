"""A schedule's backlog is counted, not walked, and the count is the walk's.

`scan_due` summarizes the occurrences after a schedule's cursor that are due at `now`. It counts
those certainly due (at or before now - jitter) without listing them (arithmetic for intervals,
whole plain days for cron lines, both for their unions); the summary must be exactly what
walking every occurrence gives: the count, the first, second, previous and last due ones with
their due times, and the one after them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.calendar import Interval, Spec, counting
from app.calendar.counting import count_occurrences
from app.calendar.occurrences import HORIZON
from app.schedules.tick.policy import DueScan, due_occurrences, scan_due, summarize_due

START = datetime(2026, 3, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def walked(spec: Spec, uid: str, jitter: int, cursor: datetime, now: datetime) -> DueScan:
    stream = due_occurrences(spec, uid, jitter, cursor, max(cursor, now) + HORIZON)
    return summarize_due(stream, now)


@st.composite
def lone_intervals(draw: st.DrawFn) -> tuple[Spec, int, datetime, datetime]:
    every = timedelta(seconds=draw(st.sampled_from([1, 7, 60, 90, 3600])))
    offset = timedelta(seconds=draw(st.integers(0, int(every.total_seconds()) - 1)))
    cursor = START + timedelta(
        seconds=draw(st.integers(0, 4000)), microseconds=draw(st.integers(0, 2))
    )
    # Backlogs of a few occurrences (around the counted/walked split) as well as long ones.
    periods = draw(st.sampled_from([2, 4, 40]))
    now = cursor + timedelta(
        seconds=draw(st.integers(-100, periods * int(every.total_seconds()) + 400))
    )
    bounds = {}
    if draw(st.booleans()):
        bounds["start_at"] = cursor + timedelta(seconds=draw(st.integers(-50, 300)))
    if draw(st.booleans()):
        bounds["end_at"] = now + timedelta(seconds=draw(st.integers(-300, 300)))
        if "start_at" in bounds and bounds["end_at"] < bounds["start_at"]:
            del bounds["end_at"]
    spec = Spec(intervals=(Interval(every, offset),), timezone="Europe/Berlin", **bounds)
    jitter = draw(st.sampled_from([0, 0, 1, 30, 200, 3600]))
    return spec, jitter, cursor, now


ZONES = [
    "UTC",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Beirut",
    "America/Asuncion",
    "Pacific/Apia",
]
CRONS = ["* * * * *", "*/7 * * * *", "30 2 * * *", "0 0,23 * * *", "15 0-3 * * 0", "0 12 29 2 *"]


@st.composite
def lone_crons(draw: st.DrawFn) -> tuple[Spec, int, datetime, datetime]:
    # Around each zone's transitions: spring and autumn of several years, ends anywhere.
    year = draw(st.integers(2009, 2027))
    cursor = datetime(year, draw(st.sampled_from([3, 4, 9, 10, 11, 12])), 1, tzinfo=UTC)
    cursor += timedelta(minutes=draw(st.integers(0, 40 * 1440)))
    now = cursor + timedelta(
        minutes=draw(st.sampled_from([3, 90, 3 * 1440, 45 * 1440, 120 * 1440]))
    )
    now += timedelta(seconds=draw(st.integers(-90, 90)))
    bounds = {}
    if draw(st.booleans()):
        bounds["end_at"] = now - timedelta(hours=draw(st.integers(0, 100)))
    spec = Spec(
        cron_expressions=(draw(st.sampled_from(CRONS)),),
        timezone=draw(st.sampled_from(ZONES)),
        **bounds,
    )
    return spec, draw(st.sampled_from([0, 0, 30, 3600])), cursor, now


@st.composite
def unions(draw: st.DrawFn) -> tuple[Spec, int, datetime, datetime]:
    # Several cron lines and intervals that share instants (a whole-minute interval lands on a
    # minutely grid; two intervals meet at their common multiples), around DST transitions.
    crons = draw(st.lists(st.sampled_from(CRONS + ["0 * * * *", "*/20 1-3 * * 1-5"]), max_size=3))
    seconds = [30, 60, 90, 420, 3600, 86399]
    # Offsets in whole half-minutes, so that intervals land on cron minutes; a period that does
    # not divide a day (420 s, 86,399 s) meets the grid at a different phase every day.
    intervals = [
        Interval(
            timedelta(seconds=every),
            timedelta(seconds=30 * draw(st.integers(0, (every - 1) // 30))),
        )
        for every in draw(st.lists(st.sampled_from(seconds), max_size=3))
    ]
    if len(crons) + len(intervals) < 2:
        crons.append("*/5 * * * *")
    year = draw(st.integers(2015, 2027))
    cursor = datetime(year, draw(st.sampled_from([3, 4, 10, 11])), 1, tzinfo=UTC)
    cursor += timedelta(seconds=draw(st.integers(0, 30 * 86400)))
    now = cursor + timedelta(minutes=draw(st.sampled_from([2, 90, 2 * 1440, 9 * 1440])))
    bounds = {}
    if draw(st.booleans()):
        bounds["start_at"] = cursor + timedelta(seconds=draw(st.integers(-50, 4000)))
    spec = Spec(
        cron_expressions=tuple(crons),
        intervals=tuple(intervals),
        timezone=draw(st.sampled_from(ZONES)),
        **bounds,
    )
    return spec, draw(st.sampled_from([0, 0, 30, 3600])), cursor, now


@settings(max_examples=550, deadline=None)
@given(st.one_of(lone_intervals(), lone_crons(), unions()))
def test_a_counted_backlog_is_its_walked_backlog(
    case: tuple[Spec, int, datetime, datetime],
) -> None:
    spec, jitter, cursor, now = case
    assert scan_due(spec, "uid-1", jitter, cursor, now) == walked(
        spec, "uid-1", jitter, cursor, now
    )


def test_a_year_of_a_minutely_cron_is_counted_whole() -> None:
    spec = Spec(cron_expressions=("* * * * *",), timezone="America/New_York")
    cursor = START
    scan = scan_due(spec, "uid-4", 0, cursor, cursor + timedelta(days=365, seconds=30))
    assert scan.count == 365 * 1440 and scan.upcoming is not None
    assert scan.last is not None and scan.last.instant == cursor + timedelta(days=365)


def test_a_month_of_a_one_second_interval_is_counted_whole() -> None:
    spec = Spec(intervals=(Interval(timedelta(seconds=1)),))
    cursor = START
    now = cursor + timedelta(days=30, milliseconds=500)
    for jitter in (0, 45):
        scan = scan_due(spec, "uid-2", jitter, cursor, now)
        assert scan.count == 30 * 86400
        assert scan.first is not None and scan.first.instant == cursor + timedelta(seconds=1)
        assert scan.last is not None and scan.last.instant == cursor + timedelta(days=30)
        assert scan.previous is not None
        assert scan.previous.instant == scan.last.instant - timedelta(seconds=1)
        assert scan.upcoming is not None
        assert scan.upcoming.instant == cursor + timedelta(days=30, seconds=1)


def test_ten_years_of_several_lines_are_counted_whole() -> None:
    # Every minute, again at the top of each hour, and every 30 s (which meets every minute):
    # 2,880 distinct instants a day. Walked, ten years of them took the tick half a minute.
    spec = Spec(
        cron_expressions=("* * * * *", "0 * * * *"),
        intervals=(Interval(timedelta(seconds=30)),),
        timezone="Europe/Berlin",
    )
    cursor = START
    now = cursor + timedelta(days=3653, seconds=10)
    scan = scan_due(spec, "uid-5", 0, cursor, now)
    assert scan.count == 3653 * 2880
    assert scan.first is not None and scan.first.instant == cursor + timedelta(seconds=30)
    assert scan.last is not None and scan.last.instant == cursor + timedelta(days=3653)
    assert scan.upcoming is not None
    assert scan.upcoming.instant == cursor + timedelta(days=3653, seconds=30)


@st.composite
def interval_sets(draw: st.DrawFn) -> tuple[list[Interval], datetime, datetime]:
    seconds = [1, 2, 3, 7, 30, 90, 420, 3600, 86399, 259200]
    intervals = []
    for every in draw(st.lists(st.sampled_from(seconds), min_size=1, max_size=5)):
        offset = draw(st.integers(0, every - 1)) if draw(st.booleans()) else 0
        intervals.append(Interval(timedelta(seconds=every), timedelta(seconds=offset)))
    after = START + timedelta(
        seconds=draw(st.integers(0, 10**6)), microseconds=draw(st.integers(0, 1))
    )
    return intervals, after, after + timedelta(seconds=draw(st.integers(0, 20000)))


@contextmanager
def terms_limit(limit: int) -> Iterator[None]:
    saved, counting.TERMS_LIMIT = counting.TERMS_LIMIT, limit
    try:
        yield
    finally:
        counting.TERMS_LIMIT = saved


@settings(max_examples=300, deadline=None)
@given(interval_sets(), st.booleans())
def test_a_union_of_intervals_counts_what_listing_them_finds(case, by_periods):
    # Inclusion-exclusion, and the common-period count it falls back on past its term limit.
    intervals, after, until = case
    listed = set()
    for interval in intervals:
        base = EPOCH + interval.offset
        instant = base + ((after - base) // interval.every + 1) * interval.every
        while instant <= until:
            listed.add(instant)
            instant += interval.every
    with terms_limit(0 if by_periods else counting.TERMS_LIMIT):
        assert counting.count_intervals(intervals, after, until) == len(listed)


def test_ten_years_of_a_one_second_interval_beside_a_three_day_one_are_counted_whole():
    # Their common period holds 259,201 instants: walked, a tester's tick took 134 s.
    spec = Spec(intervals=(Interval(timedelta(seconds=1)), Interval(timedelta(days=3))))
    cursor = START
    scan = scan_due(spec, "uid-6", 0, cursor, cursor + timedelta(days=3650, milliseconds=10))
    assert scan.count == 3650 * 86400
    # An interval one second short of a day meets a minutely grid at a new phase each day; it
    # lands on a whole minute every 60th time (every 5,183,940 s since the epoch).
    minutely = Spec(cron_expressions=("* * * * *",), timezone="America/New_York")
    off_grid = Spec(
        intervals=(Interval(timedelta(seconds=86399)),),
        cron_expressions=("* * * * *",),
        timezone="America/New_York",
    )
    now = cursor + timedelta(days=3650)
    low, high = int((cursor - EPOCH).total_seconds()), int((now - EPOCH).total_seconds())
    interval, shared = high // 86399 - low // 86399, high // 5183940 - low // 5183940
    expected = count_occurrences(minutely, cursor, now) + interval - shared
    assert count_occurrences(off_grid, cursor, now) == expected
