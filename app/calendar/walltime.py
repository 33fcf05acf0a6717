"""Local days and wall-clock times in a zone, with the DST rules in docs/calendar.md.

A day is "plain" when one UTC offset covers all of its wall-clock times; then a wall time maps to
exactly one instant and the caller can enumerate lazily. Days touched by a transition are resolved
here time by time: gap times shift to the first instant after the gap (named hours) or vanish
(every hour), repeated times keep their first occurrence (named hours) or fire in both folds.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from app.calendar.grammar import CronFields, parse_calendar

ONE_DAY = timedelta(days=1)
ONE_SECOND = timedelta(seconds=1)
TINY = timedelta(microseconds=1)
ZERO = timedelta(0)
TWICE = "occurs twice on this day"

Item = tuple[datetime, str | None]


@lru_cache(maxsize=65536)
def plain_offset(zone: ZoneInfo, day: date) -> timedelta | None:
    """The single UTC offset of every wall time of `day`, or None if a transition touches it."""
    start = datetime(day.year, day.month, day.day, tzinfo=zone)
    offset = start.utcoffset()
    end = start + ONE_DAY
    # fold=1 differs from fold=0 exactly at ambiguous and nonexistent wall times.
    for wall in (start.replace(fold=1), end, end.replace(fold=1)):
        if wall.utcoffset() != offset:
            return None
    return offset


def day_lower_bound(zone: ZoneInfo, day: date) -> datetime:
    """An instant no later than any instant whose local date is `day` or later."""
    start = datetime(day.year, day.month, day.day, tzinfo=zone)
    return min(start.astimezone(UTC), start.replace(fold=1).astimezone(UTC))


def transition_day(fields: CronFields, zone: ZoneInfo, day: date) -> tuple[Item, ...]:
    """All occurrences of `fields` on a transition `day`, sorted, unique, with their DST note."""
    return _transition_day(fields.expression, zone, day)


@lru_cache(maxsize=4096)
def _transition_day(expression: str, zone: ZoneInfo, day: date) -> tuple[Item, ...]:
    fields = parse_calendar(expression)
    shifted: defaultdict[datetime, list[str]] = defaultdict(list)
    notes: dict[datetime, str | None] = {}
    for hour in fields.hours:
        for minute in fields.minutes:
            wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
            label = f"{hour:02d}:{minute:02d}"
            off_before, off_after = _offsets(wall)
            if off_before >= off_after:
                for instant, note in _folds(wall, label, fields.every_hour):
                    notes.setdefault(instant, note)
            elif not fields.every_hour:
                as_utc = wall.replace(tzinfo=UTC)
                shifted[gap_end(zone, as_utc - off_after, as_utc - off_before)].append(label)
    for instant, labels in shifted.items():
        notes[instant] = _merge_notes(notes.get(instant), _shift_note(labels))
    return tuple(sorted(notes.items()))


def _offsets(wall: datetime) -> tuple[timedelta, timedelta]:
    """UTC offsets of `wall` before and after a transition; equal when none is involved.

    PEP 495: fold=0 takes the offset before a transition and fold=1 the one after, so a larger
    first offset means the clock fell back over `wall` and a smaller one that it sprang forward.
    """
    return wall.utcoffset() or ZERO, wall.replace(fold=1).utcoffset() or ZERO


def _folds(wall: datetime, label: str, every_hour: bool) -> list[Item]:
    """The instants an existing wall time fires at: its only one, or the folds DST keeps."""
    as_utc = wall.replace(tzinfo=UTC)
    off_before, off_after = _offsets(wall)
    if off_before == off_after:
        return [(as_utc - off_before, None)]
    if not every_hour:
        return [
            (as_utc - off_before, f"repeated: {label} {TWICE} (fires at the first occurrence only)")
        ]
    return [
        (as_utc - off_before, f"repeated: {label} {TWICE} (first occurrence)"),
        (as_utc - off_after, f"second occurrence of {label} (clock fell back)"),
    ]


def gap_end(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The transition instant in (before, after]: the first instant after a spring-forward gap."""
    offset = before.astimezone(zone).utcoffset()
    low, high = 0, int((after - before) // ONE_SECOND)
    # Transitions fall on whole seconds, so bisecting seconds finds the exact instant.
    while high - low > 1:
        middle = (low + high) // 2
        if (before + middle * ONE_SECOND).astimezone(zone).utcoffset() == offset:
            low = middle
        else:
            high = middle
    return before + high * ONE_SECOND


def _shift_note(labels: list[str]) -> str:
    if len(labels) == 1:
        return f"shifted: {labels[0]} does not exist on this day"
    if len(labels) <= 4:
        return f"shifted: {', '.join(labels)} do not exist on this day"
    return f"shifted: {len(labels)} times from {labels[0]} to {labels[-1]} do not exist on this day"


def _merge_notes(first: str | None, second: str | None) -> str | None:
    if first and second and first != second:
        return f"{first}; {second}"
    return first or second
