"""Pure calendar engine: cron grammar, time zones and DST, intervals, bounds, jitter, preview.

No I/O and no clock reads: every function takes the instants it needs. All instants returned are
timezone-aware UTC datetimes.
"""

from __future__ import annotations

from app.calendar.describe import describe_spec
from app.calendar.durations import format_duration, parse_duration
from app.calendar.errors import CalendarError, SpecRangeError
from app.calendar.grammar import validate_calendar
from app.calendar.instants import format_utc, format_utc_or_none, parse_instant, validate_timezone
from app.calendar.jitter import due_time, jitter_offset
from app.calendar.occurrences import (
    check_range,
    counted_run,
    next_occurrence,
    occurrences_between,
)
from app.calendar.preview import PreviewItem, preview
from app.calendar.spec import Interval, Spec

__all__ = [
    "CalendarError",
    "Interval",
    "PreviewItem",
    "Spec",
    "SpecRangeError",
    "check_range",
    "describe_spec",
    "due_time",
    "format_duration",
    "format_utc",
    "format_utc_or_none",
    "counted_run",
    "jitter_offset",
    "next_occurrence",
    "occurrences_between",
    "parse_duration",
    "parse_instant",
    "preview",
    "validate_calendar",
    "validate_timezone",
]
