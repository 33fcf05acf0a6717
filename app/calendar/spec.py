"""Specs: cron expressions and intervals in a time zone, with inclusive bounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from app.calendar.durations import format_duration, parse_duration
from app.calendar.errors import CalendarError, Loc
from app.calendar.grammar import CronFields, parse_calendar
from app.calendar.instants import (
    format_utc_or_none,
    parse_instant,
    same_instant,
    validate_timezone,
)

# Each expression and interval costs time on every firing, preview and page render; a spec needs
# a handful, so a hard cap keeps one schedule's cost bounded.
MAX_CRON_EXPRESSIONS = 32
MAX_INTERVALS = 32
SPEC_KEYS = frozenset({"cron_expressions", "cron", "intervals", "timezone", "start_at", "end_at"})
INTERVAL_KEYS = frozenset({"every", "offset"})


@dataclass(frozen=True)
class Interval:
    """Occurrences at epoch + offset + k * every, in UTC (docs/calendar.md)."""

    every: timedelta
    offset: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if not isinstance(self.every, timedelta) or self.every < timedelta(seconds=1):
            raise CalendarError("every must be at least PT1S", ("every",))
        if not isinstance(self.offset, timedelta) or not timedelta(0) <= self.offset < self.every:
            raise CalendarError("offset must be at least PT0S and less than every", ("offset",))

    @classmethod
    def from_dict(cls, data: Any) -> Interval:
        """Build from `{"every": "PT30M", "offset": "PT5M"}`; loc is relative to the interval."""
        if not isinstance(data, Mapping):
            raise CalendarError("interval must be an object with 'every' and 'offset'")
        _reject_unknown(data, INTERVAL_KEYS)
        if "every" not in data:
            raise CalendarError("every is required", ("every",))
        every = parse_duration(data["every"], ("every",))
        offset_text = data.get("offset")
        offset = parse_duration("PT0S" if offset_text is None else offset_text, ("offset",))
        return cls(every, offset)

    def to_dict(self) -> dict[str, str]:
        return {"every": format_duration(self.every), "offset": format_duration(self.offset)}


@dataclass(frozen=True)
class Spec:
    """A validated calendar spec; construction raises CalendarError for anything invalid."""

    cron_expressions: tuple[str, ...] = ()
    intervals: tuple[Interval, ...] = ()
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    zone: ZoneInfo = field(init=False, repr=False, compare=False)
    calendars: tuple[CronFields, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.cron_expressions, str):
            raise CalendarError("must be a list of expressions", ("cron_expressions",))
        _check_size(self.cron_expressions, "cron_expressions", MAX_CRON_EXPRESSIONS)
        _check_size(self.intervals, "intervals", MAX_INTERVALS)
        calendars = tuple(
            _parse_expression(expr, ("cron_expressions", index))
            for index, expr in enumerate(self.cron_expressions)
        )
        intervals = tuple(self.intervals)
        if not all(isinstance(interval, Interval) for interval in intervals):
            raise CalendarError("intervals must be Interval objects", ("intervals",))
        if not calendars and not intervals:
            raise CalendarError("a spec needs at least one cron expression or interval")
        start_at = _bound(self.start_at, "start_at")
        end_at = _bound(self.end_at, "end_at")
        if start_at is not None and end_at is not None and end_at < start_at:
            raise CalendarError("end_at must not be before start_at", ("end_at",))
        normalized = {
            "cron_expressions": tuple(calendar.expression for calendar in calendars),
            "intervals": intervals,
            "zone": validate_timezone(self.timezone),
            "calendars": calendars,
            "start_at": start_at,
            "end_at": end_at,
        }
        # Frozen dataclass: normalise once here so every Spec in the system is canonical.
        for name, value in normalized.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, data: Any) -> Spec:
        """Build from the API shape (also the `cron` shorthand); loc is relative to the spec."""
        if not isinstance(data, Mapping):
            raise CalendarError("spec must be an object")
        _reject_unknown(data, SPEC_KEYS)
        expressions = _expressions(data)
        raw_intervals = _list(data, "intervals")
        _check_size(raw_intervals, "intervals", MAX_INTERVALS)
        intervals = []
        for index, raw in enumerate(raw_intervals):
            try:
                intervals.append(Interval.from_dict(raw))
            except CalendarError as exc:
                raise exc.within("intervals", index) from None
        timezone = data.get("timezone")
        return cls(
            cron_expressions=expressions,
            intervals=tuple(intervals),
            timezone="UTC" if timezone is None else timezone,
            start_at=_instant(data, "start_at"),
            end_at=_instant(data, "end_at"),
        )

    def fires_like(self, other: Spec) -> bool:
        """True when both specs have the same occurrences whatever their spelling: the same
        expanded cron fields (`00` is `0`, `0-23` is `*`, in any order, repeats ignored), the
        same intervals, zone name and bounds."""
        return self._occurrence_key() == other._occurrence_key()

    def _occurrence_key(self) -> tuple[Any, ...]:
        fields = frozenset(
            (c.minutes, c.hours, c.days, c.months, c.weekdays) for c in self.calendars
        )
        return (fields, frozenset(self.intervals), self.timezone, self.start_at, self.end_at)

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON-able form."""
        return {
            "cron_expressions": list(self.cron_expressions),
            "intervals": [interval.to_dict() for interval in self.intervals],
            "timezone": self.timezone,
            "start_at": format_utc_or_none(self.start_at),
            "end_at": format_utc_or_none(self.end_at),
        }


def _parse_expression(expr: Any, loc: Loc) -> CronFields:
    try:
        return parse_calendar(expr)
    except TypeError:
        raise CalendarError("expression must be a string", loc) from None
    except CalendarError as exc:
        raise exc.within(*loc) from None


def _bound(value: datetime | None, name: str) -> datetime | None:
    return None if value is None else parse_instant(value, (name,))


def _check_size(items: Any, key: str, limit: int) -> None:
    if len(items) > limit:
        raise CalendarError(f"at most {limit} entries are allowed", (key,), "VALIDATION")


def _expressions(data: Mapping[str, Any]) -> tuple[str, ...]:
    raw = _list(data, "cron_expressions")
    _check_size(
        [*raw, *([data["cron"]] if data.get("cron") is not None else [])],
        "cron_expressions",
        MAX_CRON_EXPRESSIONS,
    )
    canonical = [
        _parse_expression(expr, ("cron_expressions", index)).expression
        for index, expr in enumerate(raw)
    ]
    if data.get("cron") is not None:
        canonical.append(_parse_expression(data["cron"], ("cron",)).expression)
    # Identical expressions add nothing, and the canonical form must not list one twice.
    return tuple(dict.fromkeys(canonical))


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise CalendarError("must be a list", (key,))
    return list(value)


def _instant(data: Mapping[str, Any], key: str) -> datetime | None:
    value = data.get(key)
    # `start_at` is a lower bound: digits finer than a microsecond round it up, not down. An
    # `end_at` given as the very same instant rounds with it, so the two stay one instant.
    if value is None:
        return None
    start = data.get("start_at")
    up = key == "start_at" or (start is not None and same_instant(value, start))
    return parse_instant(value, (key,), round_up=up)


def _reject_unknown(data: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in data:
        if key not in allowed:
            raise CalendarError(f"unknown field {key!r}", (str(key),))
