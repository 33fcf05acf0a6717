"""Enumerate the occurrences of one cron expression in one zone, in increasing UTC order."""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from app.calendar.grammar import MONTH_DAYS, CronFields
from app.calendar.walltime import (
    ONE_DAY,
    Item,
    day_lower_bound,
    plain_offset,
    transition_day,
)


def iter_cron(
    fields: CronFields, zone: ZoneInfo, after: datetime, until: datetime
) -> Iterator[Item]:
    """Yield (instant, DST note) for occurrences with after < instant <= until, each once."""
    emitted = after
    for instant, note in _iter_days(fields, zone, after, until):
        if instant > until:
            return
        if instant > emitted:
            emitted = instant
            yield instant, note


def _iter_days(
    fields: CronFields, zone: ZoneInfo, after: datetime, until: datetime
) -> Iterator[Item]:
    # Start a day early: a fold crossing midnight can give later instants an earlier local date.
    day: date | None = after.astimezone(zone).date() - ONE_DAY
    last = until.astimezone(zone).date() + ONE_DAY
    # Transition-day items wait here until no later day can produce an earlier instant.
    pending: list[tuple[datetime, int, str | None]] = []
    order = itertools.count()
    while (day := next_matching_date(fields, day, last)) is not None:
        if pending:
            bound = day_lower_bound(zone, day)
            while pending and pending[0][0] < bound:
                instant, _, note = heapq.heappop(pending)
                yield instant, note
        offset = plain_offset(zone, day)
        if offset is None:
            for instant, note in transition_day(fields, zone, day):
                heapq.heappush(pending, (instant, next(order), note))
        elif pending:
            waiting = [(instant, note) for instant, _, note in sorted(pending)]
            pending.clear()
            yield from heapq.merge(waiting, _plain_day(fields, day, offset, after), key=_first)
        else:
            yield from _plain_day(fields, day, offset, after)
        day += ONE_DAY
    for instant, _, note in sorted(pending):
        yield instant, note


def _first(item: Item) -> datetime:
    return item[0]


def _plain_day(fields: CronFields, day: date, offset: timedelta, after: datetime) -> Iterator[Item]:
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
    local_after = after + offset
    hours, minutes = fields.hours, fields.minutes
    first_hour, first_minute = 0, 0
    after_day = local_after.date()
    if after_day > day:
        return
    if after_day == day:
        # Skip straight to the first wall time strictly after `after` instead of scanning.
        first_hour = bisect_left(hours, local_after.hour)
        if first_hour < len(hours) and hours[first_hour] == local_after.hour:
            first_minute = bisect_right(minutes, local_after.minute)
            if first_minute == len(minutes):
                first_hour, first_minute = first_hour + 1, 0
    for index in range(first_hour, len(hours)):
        hour = midnight + timedelta(hours=hours[index])
        for minute in minutes[first_minute:]:
            yield hour + timedelta(minutes=minute), None
        first_minute = 0


def next_matching_date(fields: CronFields, day: date | None, last: date) -> date | None:
    """The first date >= `day` and <= `last` matching month, day of month and day of week."""
    while day is not None and day <= last:
        if day.month not in fields.months:
            day = _first_of_next_month(day, fields.months)
            continue
        if day.day not in fields.days:
            index = bisect_left(fields.days, day.day)
            if index < len(fields.days) and fields.days[index] <= _month_length(day):
                day = day.replace(day=fields.days[index])
            else:
                day = _first_of_next_month(day, fields.months)
            continue
        if day.isoweekday() % 7 not in fields.weekdays:
            day += ONE_DAY
            continue
        return day
    return None


def _first_of_next_month(day: date, months: tuple[int, ...]) -> date | None:
    index = bisect_right(months, day.month)
    year = day.year if index < len(months) else day.year + 1
    if year > date.max.year:
        return None
    return date(year, months[index % len(months)], 1)


def _month_length(day: date) -> int:
    if day.month != 2:
        return MONTH_DAYS[day.month - 1]
    leap = day.year % 4 == 0 and (day.year % 100 != 0 or day.year % 400 == 0)
    return 29 if leap else 28
