"""Property tests: the engine against an independent minute-by-minute matcher and croniter.

The brute-force matcher walks every UTC minute of a window, converts it to local time with
`astimezone` (no wall-to-UTC mapping at all), matches the field sets the strategy built itself,
and applies the DST rules from scratch: named hours keep only fold 0 and fire the wall times
skipped by a forward jump at the first minute after it; every-hour calendars fire whatever matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.calendar import Interval, Spec, next_occurrence, occurrences_between

ZONES = (
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "America/Sao_Paulo",
    "America/Havana",
    "Asia/Tehran",
    "Asia/Kolkata",
    "America/St_Johns",
)
LONGEST_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30}
LONGEST_MONTH[12] = 31
MINUTE = timedelta(minutes=1)
PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Calendar:
    """An expression and the value sets it means, built side by side by the strategy."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]

    def matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.day in self.days
            and wall.month in self.months
            and wall.isoweekday() % 7 in self.weekdays
        )


@st.composite
def field(
    draw: st.DrawFn, low: int, high: int, near: tuple[int, int] | None = None
) -> tuple[str, frozenset[int]]:
    numbers = st.integers(low, high)
    if near is not None:
        # Two branches of three near the values where transitions happen.
        numbers = st.one_of(st.integers(*near), st.integers(*near), numbers)
    kind = draw(st.sampled_from(("star", "number", "list", "range", "range_step", "star_step")))
    if kind == "star":
        return "*", frozenset(range(low, high + 1))
    if kind == "number":
        value = draw(numbers)
        return str(value), frozenset({value})
    if kind == "list":
        values = draw(st.lists(numbers, min_size=1, max_size=6))
        return ",".join(map(str, values)), frozenset(values)
    if kind == "star_step":
        step = draw(st.integers(1, high - low + 1))
        return f"*/{step}", frozenset(range(low, high + 1, step))
    first, second = sorted((draw(numbers), draw(numbers)))
    if kind == "range":
        return f"{first}-{second}", frozenset(range(first, second + 1))
    step = draw(st.integers(1, high - low + 1))
    return f"{first}-{second}/{step}", frozenset(range(first, second + 1, step))


@st.composite
def calendars(draw: st.DrawFn) -> Calendar:
    minute = draw(field(0, 59, near=(0, 3)) if draw(st.booleans()) else field(0, 59))
    if draw(st.integers(0, 2)):
        hour = draw(field(0, 23, near=(0, 3)))
    else:
        hour = (draw(st.sampled_from(("*", "*/1", "0-23"))), frozenset(range(24)))
    star_day = ("*", frozenset(range(1, 32)))
    star_weekday = ("*", frozenset(range(7)))
    restrict = draw(st.sampled_from(("none", "none", "none", "day", "weekday", "month")))
    day = draw(field(1, 31)) if restrict == "day" else star_day
    weekday = draw(field(0, 6)) if restrict == "weekday" else star_weekday
    month = draw(field(1, 12)) if restrict == "month" else ("*", frozenset(range(1, 13)))
    # Impossible calendars are rejected by validation; they are tested elsewhere.
    assume(min(day[1]) <= max(LONGEST_MONTH[m] for m in month[1]))
    text = " ".join((minute[0], hour[0], day[0], month[0], weekday[0]))
    return Calendar(text, minute[1], hour[1], day[1], month[1], weekday[1])


@cache
def transitions(zone_name: str, year: int) -> tuple[datetime, ...]:
    """The instants in `year` at which the zone's UTC offset changes, to the second."""
    zone = ZoneInfo(zone_name)
    found = []
    noon = datetime(year, 1, 1, 12, tzinfo=UTC)
    for _ in range(366):
        low, noon = noon, noon + timedelta(days=1)
        if low.astimezone(zone).utcoffset() != noon.astimezone(zone).utcoffset():
            found.append(_bisect_change(zone, low, noon))
    return tuple(found)


def _bisect_change(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    offset = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) // 2
        if middle.astimezone(zone).utcoffset() == offset:
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, datetime, datetime]:
    """A window of 1-3 days in a random zone and year, mostly around one of its transitions."""
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.integers(2000, 2040))
    changes = transitions(zone, year)
    if changes and draw(st.integers(0, 3)):
        change = draw(st.sampled_from(changes))
        after = change - timedelta(seconds=draw(st.integers(0, 36 * 3600)))
        return zone, after, change + timedelta(seconds=draw(st.integers(0, 36 * 3600)))
    after = datetime(year, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 364 * 86400)))
    return zone, after, after + timedelta(hours=draw(st.integers(24, 72)))


def brute_force(
    calendar: Calendar, zone_name: str, after: datetime, until: datetime
) -> set[datetime]:
    zone = ZoneInfo(zone_name)
    every_hour = len(calendar.hours) == 24
    instant = after.replace(second=0, microsecond=0) - MINUTE
    previous_wall = instant.astimezone(zone).replace(tzinfo=None)
    found = set()
    while instant < until:
        instant += MINUTE
        local = instant.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        if calendar.matches(wall) and (every_hour or local.fold == 0):
            found.add(instant)
        skipped = previous_wall + MINUTE
        while not every_hour and skipped < wall:
            # Wall times jumped over by spring-forward fire at the first instant after the gap.
            if calendar.matches(skipped):
                found.add(instant)
            skipped += MINUTE
        previous_wall = wall
    return {t for t in found if after < t <= until}


def interval_instants(interval: Interval, after: datetime, until: datetime) -> set[datetime]:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    every, offset = int(interval.every.total_seconds()), int(interval.offset.total_seconds())
    first = int((after - epoch).total_seconds()) // every * every + offset - every
    return {
        epoch + timedelta(seconds=seconds)
        for seconds in range(first, int((until - epoch).total_seconds()) + every, every)
        if after < epoch + timedelta(seconds=seconds) <= until
    }


def chain(spec: Spec, after: datetime, until: datetime) -> list[datetime]:
    instants: list[datetime] = []
    while (found := next_occurrence(spec, instants[-1] if instants else after)) is not None:
        if found > until:
            break
        instants.append(found)
    return instants


@pytest.mark.parametrize("zone", ZONES)
def test_every_single_time_around_transitions_matches_brute_force(zone: str) -> None:
    """Exhaustive companion to the properties: each hh:mm near each 2010 and 2026 transition."""
    hours = ("0", "1", "2", "3", "23", "*")
    expressions = [f"{minute} {hour} * * *" for hour in hours for minute in (0, 15, 30, 45, 59)]
    for change in transitions(zone, 2010) + transitions(zone, 2026):
        after, until = change - timedelta(hours=4, seconds=1), change + timedelta(hours=4)
        for text in expressions:
            minute, hour = text.split()[:2]
            calendar = Calendar(
                text,
                frozenset({int(minute)}),
                frozenset(range(24)) if hour == "*" else frozenset({int(hour)}),
                frozenset(range(1, 32)),
                frozenset(range(1, 13)),
                frozenset(range(7)),
            )
            spec = Spec(cron_expressions=(text,), timezone=zone)
            expected = sorted(brute_force(calendar, zone, after, until))
            assert list(occurrences_between(spec, after, until)) == expected, (zone, change, text)


@PROPERTY_SETTINGS
@given(calendar=calendars(), window=windows())
def test_cron_matches_brute_force_around_transitions(
    calendar: Calendar, window: tuple[str, datetime, datetime]
) -> None:
    zone, after, until = window
    spec = Spec(cron_expressions=(calendar.text,), timezone=zone)
    expected = sorted(brute_force(calendar, zone, after, until))
    assert list(occurrences_between(spec, after, until)) == expected
    assert chain(spec, after, until) == expected


@PROPERTY_SETTINGS
@given(
    first=calendars(),
    second=calendars(),
    window=windows(),
    every=st.integers(60, 6 * 3600),
    offset_fraction=st.floats(0, 0.999),
    bounds=st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_merged_spec_matches_brute_force_within_bounds(
    first: Calendar,
    second: Calendar,
    window: tuple[str, datetime, datetime],
    every: int,
    offset_fraction: float,
    bounds: tuple[float, float],
) -> None:
    zone, after, until = window
    span = until - after
    start_at, end_at = (after + span * fraction for fraction in sorted(bounds))
    interval = Interval(timedelta(seconds=every), timedelta(seconds=int(every * offset_fraction)))
    spec = Spec((first.text, second.text), (interval,), zone, start_at, end_at)
    union = (
        brute_force(first, zone, after, until)
        | brute_force(second, zone, after, until)
        | interval_instants(interval, after, until)
    )
    expected = sorted(t for t in union if start_at <= t <= end_at)
    assert list(occurrences_between(spec, after, until)) == expected
    assert chain(spec, after, until) == expected


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    calendar=calendars(),
    zone=st.sampled_from(ZONES),
    start=st.datetimes(datetime(2000, 1, 1), datetime(2040, 12, 31), timezones=st.just(UTC)),
)
def test_successive_occurrences_strictly_increase(
    calendar: Calendar, zone: str, start: datetime
) -> None:
    spec = Spec(cron_expressions=(calendar.text,), timezone=zone)
    instants, cursor = [], start
    for _ in range(40):
        found = next_occurrence(spec, cursor)
        assert found is not None and found > cursor
        assert found.second == 0 and found.microsecond == 0
        instants.append(found)
        cursor = found
    assert list(occurrences_between(spec, start, instants[-1])) == instants


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    calendar=calendars(),
    start=st.datetimes(datetime(2000, 1, 1), datetime(2040, 12, 31), timezones=st.just(UTC)),
)
def test_utc_calendars_agree_with_croniter(calendar: Calendar, start: datetime) -> None:
    # In UTC there is no DST, so croniter's enumeration is an independent oracle, except that
    # croniter 7.0 reads a one-value range such as "5-5" or "5-5/2" as "*" (ours: just 5).
    assume(not re.search(r"(?<![0-9])([0-9]+)-\1(?![0-9])", calendar.text))
    spec = Spec(cron_expressions=(calendar.text,))
    reference = croniter(calendar.text, start)
    cursor = start
    for _ in range(10):
        found = next_occurrence(spec, cursor)
        assert found == reference.get_next(datetime).replace(tzinfo=UTC)
        assert found is not None
        cursor = found
