"""Short text a person reads for a spec, for the console (best effort, never raises).

"every minute", "every 6 hours at minute 0", "at 02:30 on the 1st of every month",
"every 15 minutes from 09:00 to 17:59 on Monday–Friday", "every 6 hours, offset 5 minutes".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import product

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
UNITS = (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def describe_spec(spec: Spec) -> str:
    """E.g. "at 02:00 every day (America/New_York); every 6 hours, offset 5 minutes"."""
    parts = []
    if spec.calendars:
        calendars = "; ".join(describe_calendar(fields) for fields in spec.calendars)
        parts.append(calendars + _zone_suffix(spec.timezone))
    parts.extend(describe_interval(interval) for interval in spec.intervals)
    text = "; ".join(parts)
    if spec.start_at is not None:
        text += f", from {format_utc(spec.start_at)}"
    if spec.end_at is not None:
        text += f", until {format_utc(spec.end_at)}"
    return text


def zone_note(timezone: str) -> str | None:
    """A warning for zones that look like a region's but are a fixed offset (EST, MST, HST,
    Etc/GMT+5): they never move for daylight saving time, which is rarely what was meant."""
    if timezone in ("UTC", "Etc/UTC", "GMT", "Etc/GMT", "Universal", "Zulu"):
        return None
    if not (timezone.isupper() or timezone.startswith("Etc/")):
        return None
    try:
        zone = Spec(("0 0 * * *",), timezone=timezone).zone
    except ValueError:
        return None
    offsets = {zone.utcoffset(datetime(2026, month, 1, tzinfo=UTC)) for month in (1, 7)}
    if len(offsets) != 1:
        return None
    offset = _offset_text(next(iter(offsets)) or timedelta(0))
    return (
        f"{timezone} is a fixed offset (UTC{offset}) and never observes daylight saving time; "
        "use a place name such as America/New_York to follow it."
    )


def _zone_suffix(timezone: str) -> str:
    if timezone == "UTC":
        return ""
    if zone_note(timezone):
        return f" ({timezone}, a fixed offset without daylight saving time)"
    return f" ({timezone})"


def _offset_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "−"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def describe_interval(interval: Interval) -> str:
    text = f"every {duration_text(interval.every)}"
    return text + (f", offset {duration_text(interval.offset, True)}" if interval.offset else "")


def duration_text(span: timedelta, always_count: bool = False) -> str:
    """In the largest unit that divides it: "6 hours", "90 minutes"; one unit is just "hour"
    (as in "every hour") unless `always_count`."""
    seconds = int(span.total_seconds())
    unit, size = next(((u, n) for u, n in UNITS if seconds % n == 0), UNITS[-1])
    count = seconds // size
    if count == 1 and not always_count:
        return unit
    return f"{count} {unit}{'s' if count != 1 else ''}"


def describe_calendar(fields: CronFields) -> str:
    """E.g. "every 5 minutes", "at 09:30 on Monday–Friday", "at 00:00 on the 1st of January"."""
    time = _describe_time(fields)
    weekday, day, month = fields.texts[4], fields.texts[2], fields.texts[3]
    days = []
    if weekday != "*":
        days.append("on " + _runs(fields.weekdays, WEEKDAYS.__getitem__))
    if day != "*":
        of = "every month" if month == "*" else _runs(fields.months, _month)
        days.append(f"on the {_runs(fields.days, ordinal)} of {of}")
    elif month != "*":
        days.append("in " + _runs(fields.months, _month))
    if time.startswith("at ") and (day == "*" and weekday == "*"):
        days.insert(0, "every day")
    return " ".join([time, *days])


def _describe_time(fields: CronFields) -> str:
    minutes, hours = fields.minutes, fields.hours
    minute_step = _step(minutes, 60)
    if len(hours) == 24:
        if minute_step:
            return "every minute" if minute_step == 1 else f"every {minute_step} minutes"
        if minutes == (0,):
            return "every hour"
        label = "minute" if len(minutes) == 1 else "minutes"
        return f"every hour at {label} {_and([str(m) for m in minutes])}"
    hour_step = _step(hours, 24)
    written_as_step = "/" in fields.texts[1] or len(minutes) * len(hours) > MAX_LISTED_TIMES
    if hour_step and written_as_step and len(minutes) == 1:
        return f"every {hour_step} hours at minute {minutes[0]}"
    if len(minutes) * len(hours) <= MAX_LISTED_TIMES:
        return "at " + _and([f"{h:02d}:{m:02d}" for h, m in product(hours, minutes)])
    if _contiguous(hours) and (minute_step or len(minutes) == 1):
        first, last = hours[0], hours[-1]
        if minute_step:
            every = "every minute" if minute_step == 1 else f"every {minute_step} minutes"
            return f"{every} from {first:02d}:00 to {last:02d}:59"
        return f"every hour from {first:02d}:{minutes[0]:02d} to {last:02d}:{minutes[0]:02d}"
    label = "minute" if len(minutes) == 1 else "minutes"
    return f"at {label} {_runs(minutes, str)} past hours {_runs(hours, str)}"


def _step(values: Sequence[int], size: int) -> int | None:
    """The step of a field that is `*/step` from 0 (all values evenly spaced over the field)."""
    if len(values) < 2 or values[0] != 0:
        return None if len(values) != size else 1
    step = values[1] - values[0]
    return step if tuple(range(0, size, step)) == tuple(values) else None


def _contiguous(values: Sequence[int]) -> bool:
    return tuple(values) == tuple(range(values[0], values[-1] + 1))


def _month(value: int) -> str:
    return MONTHS[value - 1]


def ordinal(value: int) -> str:
    suffix = "th" if 10 <= value % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")
    return f"{value}{suffix}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _runs(values: Iterable[int], name: Callable[[int], str]) -> str:
    """Name contiguous runs: [1, 2, 3, 5] -> "Monday–Wednesday and Friday"."""
    runs: list[list[int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    pieces = []
    for run in runs:
        if len(run) > 2:
            pieces.append(f"{name(run[0])}–{name(run[-1])}")
        else:
            pieces.extend(map(name, run))
    return _and(pieces)
