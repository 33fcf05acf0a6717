"""Canonical occurrences of a spec: the merge of its expressions and intervals within bounds."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice

from app.calendar.counting import count_occurrences
from app.calendar.cron import iter_cron
from app.calendar.errors import SpecRangeError
from app.calendar.instants import MAX_INSTANT, format_utc, require_utc
from app.calendar.spec import Interval, Spec
from app.calendar.walltime import Item

# 50 years of 365.25 days: the SCHEDULE_RANGE search window (docs/calendar.md).
HORIZON = timedelta(days=18263)
# Far enough from datetime's limits that local-date arithmetic in any zone cannot overflow.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
# The last instant a request may name (the end of year 9000): a spec has its occurrences through
# it, so one starting in 9000 is not refused as having none.
LATEST = MAX_INSTANT
ONE_MICROSECOND = timedelta(microseconds=1)
ONE_DAY = timedelta(days=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def next_occurrence(spec: Spec, after: datetime) -> datetime | None:
    """The earliest canonical occurrence strictly after `after`, or None within 50 years."""
    window = _window(spec, require_utc(after, ("after",)), None)
    if window is None:
        return None
    low, high = window
    firsts = [next(stream, None) for stream in _streams(spec, low, high)]
    found = [item[0] for item in firsts if item is not None]
    return min(found, default=None)


def occurrences_between(spec: Spec, after: datetime, until: datetime) -> Iterator[datetime]:
    """Canonical occurrences t with after < t <= until, increasing and unique."""
    for instant, _ in iter_occurrences(spec, after, until):
        yield instant


def iter_occurrences(spec: Spec, after: datetime, until: datetime) -> Iterator[Item]:
    """Like occurrences_between, paired with the DST note of each occurrence."""
    window = _window(spec, require_utc(after, ("after",)), require_utc(until, ("until",)))
    if window is None:
        return
    previous: Item | None = None
    for item in heapq.merge(*_streams(spec, *window), key=_instant_of):
        if previous is not None and item[0] == previous[0]:
            previous = (previous[0], previous[1] or item[1])
            continue
        if previous is not None:
            yield previous
        previous = item
    if previous is not None:
        yield previous


def counted_run(
    spec: Spec, after: datetime, until: datetime
) -> tuple[int, tuple[datetime, datetime], tuple[datetime, datetime]] | None:
    """How many occurrences t with after < t <= until there are, with the first two and the
    last two, found without listing the ones between (`count_occurrences`: arithmetic for
    intervals, whole plain days for cron lines). None when there are fewer than four (walking
    them costs nothing)."""
    window = _window(spec, require_utc(after, ("after",)), require_utc(until, ("until",)))
    if window is None:
        return None
    low, high = window
    count = count_occurrences(spec, low, high)
    if count < 4:
        return None
    head = list(islice(occurrences_between(spec, low, high), 2))
    tail = _last_two(spec, low, high)
    return count, (head[0], head[1]), tail


def _last_two(spec: Spec, low: datetime, high: datetime) -> tuple[datetime, datetime]:
    """The last two occurrences in (low, high], which holds at least two: walked from a stretch
    before `high` that widens until it holds two (a dense line finds them at once)."""
    width = min((2 * interval.every for interval in spec.intervals), default=2 * ONE_DAY)
    while True:
        near = max(low, high - width)
        found = deque(occurrences_between(spec, near, high), maxlen=2)
        if len(found) == 2:
            return found[0], found[1]
        # The caller counted four or more in (low, high]: the whole window holds two.
        assert near > low, "fewer than two occurrences in a counted window"
        width *= 4


def check_range(spec: Spec, now: datetime) -> None:
    """Raise SpecRangeError unless the spec occurs within 50 years of max(now, start_at)."""
    if next_occurrence(spec, now) is not None:
        return
    if spec.end_at is not None and spec.end_at <= require_utc(now, ("now",)):
        raise SpecRangeError(f"end_at {format_utc(spec.end_at)} is in the past", ("spec", "end_at"))
    starts_later = spec.start_at is not None and spec.start_at > require_utc(now, ("now",))
    window = "in the 50 years from start_at" if starts_later else "in the next 50 years"
    before = "" if spec.end_at is None else " before end_at"
    raise SpecRangeError(f"the spec has no occurrence {window}{before}")


def _window(
    spec: Spec, after: datetime, until: datetime | None
) -> tuple[datetime, datetime] | None:
    low = max(after, EARLIEST)
    if spec.start_at is not None:
        # Occurrences are >= start_at, i.e. strictly after the microsecond before it.
        low = max(low, spec.start_at - ONE_MICROSECOND)
    high = min(low + HORIZON, LATEST) if until is None else min(until, LATEST)
    if spec.end_at is not None:
        high = min(high, spec.end_at)
    return (low, high) if low < high else None


def _instant_of(item: Item) -> datetime:
    return item[0]


def _streams(spec: Spec, low: datetime, high: datetime) -> list[Iterator[Item]]:
    streams = [iter_cron(fields, spec.zone, low, high) for fields in spec.calendars]
    streams.extend(_iter_interval(interval, low, high) for interval in spec.intervals)
    return streams


def _iter_interval(interval: Interval, after: datetime, until: datetime) -> Iterator[Item]:
    base = EPOCH + interval.offset
    instant = base + ((after - base) // interval.every + 1) * interval.every
    while instant <= until:
        yield instant, None
        instant += interval.every
