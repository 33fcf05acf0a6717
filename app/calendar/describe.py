"""Short human-readable text for a spec, for the console list (best effort, never raises)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import product

from app.calendar.durations import format_duration
from app.calendar.grammar import CronFields
from app.calendar.instants import format_utc
from app.calendar.spec import Interval, Spec

WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
MAX_LISTED_TIMES = 6


def describe_spec(spec: Spec) -> str:
    """E.g. "at 02:00 every day (America/New_York); every PT6H offset PT5M"."""
    parts = []
    if spec.calendars:
        calendars = "; ".join(describe_calendar(fields) for fields in spec.calendars)
        zone = "" if spec.timezone == "UTC" else f" ({spec.timezone})"
        parts.append(calendars + zone)
    parts.extend(describe_interval(interval) for interval in spec.intervals)
    text = "; ".join(parts)
    if spec.start_at is not None:
        text += f", from {format_utc(spec.start_at)}"
    if spec.end_at is not None:
        text += f", until {format_utc(spec.end_at)}"
    return text


def describe_interval(interval: Interval) -> str:
    text = f"every {format_duration(interval.every)}"
    return text + (f" offset {format_duration(interval.offset)}" if interval.offset else "")


def describe_calendar(fields: CronFields) -> str:
    """E.g. "every 5 minutes", "at 09:30 on Monday–Friday", "at 00:00 on day 1 in January"."""
    minute, hour, day, month, weekday = fields.texts
    time = _describe_time(fields, minute, hour)
    days = []
    if weekday != "*":
        days.append("on " + _runs(fields.weekdays, WEEKDAYS.__getitem__))
    if day != "*":
        label = "day" if len(fields.days) == 1 else "days"
        days.append(f"on {label} " + _runs(fields.days, str))
    if month != "*":
        days.append("in " + _runs(fields.months, lambda value: MONTHS[value - 1]))
    if not days and time.startswith("at "):
        days.append("every day")
    return " ".join([time, *days])


def _describe_time(fields: CronFields, minute: str, hour: str) -> str:
    if hour == "*":
        if minute == "*":
            return "every minute"
        if minute.startswith("*/"):
            return f"every {minute[2:]} minutes"
        if minute == "0":
            return "every hour"
        return f"every hour at minute {minute}"
    if _is_list(minute) and _is_list(hour):
        times = list(product(fields.hours, fields.minutes))
        if len(times) <= MAX_LISTED_TIMES:
            return "at " + ", ".join(f"{h:02d}:{m:02d}" for h, m in times)
    return f"at minute {minute} past hour {hour}"


def _is_list(text: str) -> bool:
    return all(term.isdigit() for term in text.split(","))


def _runs(values: Iterable[int], name: Callable[[int], str]) -> str:
    """Name contiguous runs: [1, 2, 3, 5] -> "Monday–Wednesday, Friday"."""
    runs: list[list[int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(
        f"{name(run[0])}–{name(run[-1])}" if len(run) > 2 else ", ".join(map(name, run))
        for run in runs
    )
