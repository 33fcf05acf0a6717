"""Count a spec's occurrences in a window without listing most of them (a ticker's backlog).

The union of a spec's lines is split in two: its intervals (instants fixed in UTC) and its cron
lines (instants fixed in local time). Their count is the intervals' count, plus the cron lines'
count, minus the cron instants that an interval also yields (counted twice otherwise):

- Intervals: each is a progression, and their union is counted by inclusion-exclusion, the
  instants several progressions share being a progression again (or none); with very many
  intervals, a common period at a time (when a period is short enough to walk).
- Cron lines: a matching day that is plain, between plain days, holds exactly the union of its
  matching lines' hour x minute grids, all within its own 24 hours, and no other day's occurrence
  falls there (a gap shifted to a neighbour's midnight cannot happen beside a plain day): such
  days are counted whole, from a grid counted once per set of matching lines. The two ends and
  the days near a transition are walked, so the count is the walk's.
- Cron instants on an interval: on a plain day they depend only on the day's grid and on where
  the day starts within each interval's period, so each such pair is counted once, walking the
  shorter of the grid and the interval's instants that day.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from math import gcd, lcm
from zoneinfo import ZoneInfo

from app.calendar.cron import iter_cron, next_matching_date
from app.calendar.grammar import CronFields
from app.calendar.spec import Interval, Spec
from app.calendar.walltime import ONE_DAY, TINY, plain_offset

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)
ZERO = timedelta(0)
# Several intervals are counted a period at a time when one period holds at most this many of
# their instants; longer periods (periods with no small common multiple) are walked whole.
PERIOD_WALK_LIMIT = 200_000


def count_occurrences(spec: Spec, after: datetime, until: datetime) -> int:
    """How many distinct occurrences of the spec's lines fall in (after, until].

    Bounds (`start_at`, `end_at`) are the caller's: the window must already lie within them.
    """
    if after >= until:
        return 0
    total = count_intervals(spec.intervals, after, until)
    if spec.calendars:
        grids, shared = _count_calendars(spec.calendars, spec.intervals, spec.zone, after, until)
        total += grids - shared
    return total


def count_intervals(intervals: Sequence[Interval], after: datetime, until: datetime) -> int:
    """How many distinct instants the intervals yield in (after, until].

    Each interval is a progression (base + k * every, in microseconds). Their union is counted
    by inclusion-exclusion: the instants two or more progressions share are again a progression
    (period the least common multiple, base by the Chinese remainder theorem) or none at all, and
    a set of progressions sharing none has no superset sharing any, so most terms are never
    reached. Past `TERMS_LIMIT` terms, the union is counted a common period at a time instead.
    """
    lines = sorted({(interval.every, interval.offset) for interval in intervals})
    if not lines:
        return 0
    progressions = [(_us(offset) % _us(every), _us(every)) for every, offset in lines]
    low, high = _us(after - EPOCH), _us(until - EPOCH)
    terms = [0]
    total = 0

    def include(index: int, base: int, period: int, sign: int) -> None:
        # Every set of progressions from `index` on joined to the current intersection.
        nonlocal total
        for position in range(index, len(progressions)):
            joined = _intersection(base, period, *progressions[position])
            if joined is None:
                continue
            terms[0] += 1
            if terms[0] > TERMS_LIMIT:
                raise _TooManyTerms
            total += sign * _count_progression(*joined, low, high)
            include(position + 1, *joined, -sign)

    try:
        include(0, 0, 1, 1)
    except _TooManyTerms:
        return _count_by_periods(lines, after, until)
    return total


class _TooManyTerms(Exception):
    pass


# Inclusion-exclusion stops past this many non-empty intersections (32 intervals could have
# 2^32 of them; a handful of intervals has a few dozen).
TERMS_LIMIT = 4096


def _us(value: timedelta) -> int:
    return value // ONE_MICROSECOND


def _intersection(base: int, period: int, other: int, every: int) -> tuple[int, int] | None:
    """The progression of x = base (mod period) and x = other (mod every), or None."""
    common = gcd(period, every)
    if (other - base) % common:
        return None
    joined = period // common * every
    # base + period * k = other (mod every), solved for k modulo every / common.
    step = every // common
    k = ((other - base) // common * pow(period // common, -1, step)) % step if step > 1 else 0
    return (base + period * k) % joined, joined


def _count_progression(base: int, period: int, low: int, high: int) -> int:
    """How many x = base (mod period) with low < x <= high."""
    return (high - base) // period - (low - base) // period


def _count_by_periods(
    lines: Sequence[tuple[timedelta, timedelta]], after: datetime, until: datetime
) -> int:
    period = timedelta(microseconds=lcm(*(_us(every) for every, _ in lines)))
    per_period = sum(period // every for every, _ in lines)
    whole = (until - after) // period
    if whole == 0 or per_period > PERIOD_WALK_LIMIT:
        return _distinct(_interval_instants(lines, after, until))
    # The union repeats every `period`: whole periods count alike, from the first one.
    once = _distinct(_interval_instants(lines, after, after + period))
    rest = after + whole * period
    return whole * once + _distinct(_interval_instants(lines, rest, until))


def _interval_instants(
    lines: Iterable[tuple[timedelta, timedelta]], after: datetime, until: datetime
) -> Iterator[datetime]:
    streams = []
    for every, offset in lines:
        base = EPOCH + offset
        first = base + ((after - base) // every + 1) * every
        streams.append(_progression(first, every, until))
    return heapq.merge(*streams)


def _progression(first: datetime, every: timedelta, until: datetime) -> Iterator[datetime]:
    instant = first
    while instant <= until:
        yield instant
        instant += every


def _distinct(instants: Iterable[datetime]) -> int:
    count, previous = 0, None
    for instant in instants:
        if instant != previous:
            count, previous = count + 1, instant
    return count


def _count_calendars(
    calendars: Sequence[CronFields],
    intervals: Sequence[Interval],
    zone: ZoneInfo,
    after: datetime,
    until: datetime,
) -> tuple[int, int]:
    """(distinct cron instants in (after, until], how many of them an interval also yields)."""
    periods = [(interval.every, EPOCH + interval.offset) for interval in intervals]
    grids: dict[tuple[int, ...], frozenset[timedelta]] = {}
    shared_by: dict[tuple[tuple[int, ...], tuple[timedelta, ...]], int] = {}
    total = shared = 0
    walked_from = after
    first = after.astimezone(zone).date() + ONE_DAY
    last = until.astimezone(zone).date() - ONE_DAY
    upcoming: list[date | None] = [next_matching_date(f, first, last) for f in calendars]
    while any(day is not None for day in upcoming):
        day = min(day for day in upcoming if day is not None)
        matching = tuple(index for index, found in enumerate(upcoming) if found == day)
        for index in matching:
            upcoming[index] = next_matching_date(calendars[index], day + ONE_DAY, last)
        start = _plain_start(zone, day)
        if start is None or walked_from >= start or start + ONE_DAY > until:
            continue
        count, on = _walked(calendars, periods, zone, walked_from, start - TINY)
        if matching not in grids:
            grids[matching] = _grid([calendars[index] for index in matching])
        grid = grids[matching]
        total += count + len(grid)
        shared += on
        if periods:
            phases = tuple((start - base) % every for every, base in periods)
            key = (matching, phases)
            if key not in shared_by:
                shared_by[key] = _shared(grid, phases, periods)
            shared += shared_by[key]
        walked_from = start + ONE_DAY - TINY
    count, on = _walked(calendars, periods, zone, walked_from, until)
    return total + count, shared + on


def _grid(calendars: Sequence[CronFields]) -> frozenset[timedelta]:
    """The wall times after midnight at which any of the lines fires on a day they all match."""
    return frozenset(
        timedelta(hours=hour, minutes=minute)
        for fields in calendars
        for hour in fields.hours
        for minute in fields.minutes
    )


def _shared(
    grid: frozenset[timedelta],
    phases: Sequence[timedelta],
    periods: Sequence[tuple[timedelta, datetime]],
) -> int:
    """How many of a plain day's grid moments an interval also yields, the day starting at
    `phases[i]` into interval i's period: whichever of the grid and the interval's instants
    within the day is the shorter list is walked against the other."""
    found: set[timedelta] = set()
    for phase, (every, _) in zip(phases, periods, strict=True):
        first = -phase % every
        if first >= ONE_DAY:
            continue
        if (ONE_DAY - first) // every < len(grid):
            moment = first
            while moment < ONE_DAY:
                if moment in grid:
                    found.add(moment)
                moment += every
        else:
            found.update(moment for moment in grid if (phase + moment) % every == ZERO)
    return len(found)


def _walked(
    calendars: Sequence[CronFields],
    periods: Sequence[tuple[timedelta, datetime]],
    zone: ZoneInfo,
    after: datetime,
    until: datetime,
) -> tuple[int, int]:
    if after >= until:
        return 0, 0
    streams = [(item[0] for item in iter_cron(fields, zone, after, until)) for fields in calendars]
    count = shared = 0
    previous = None
    for instant in heapq.merge(*streams):
        if instant == previous:
            continue
        previous = instant
        count += 1
        if any((instant - base) % every == ZERO for every, base in periods):
            shared += 1
    return count, shared


def _plain_start(zone: ZoneInfo, day: date) -> datetime | None:
    """The UTC instant `day` starts at, if it and both its neighbours are plain; else None."""
    offset = plain_offset(zone, day)
    if offset is None or None in (
        plain_offset(zone, day - ONE_DAY),
        plain_offset(zone, day + ONE_DAY),
    ):
        return None
    return datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
