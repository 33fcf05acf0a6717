"""ISO-8601 durations of fixed length: weeks, days, hours, minutes and seconds."""

from __future__ import annotations

import re
from datetime import timedelta

from app.calendar.errors import CalendarError, Loc

_DURATION = re.compile(
    r"P(?:(?P<weeks>[0-9]{1,9})W)?(?:(?P<days>[0-9]{1,9})D)?"
    r"(?:T(?:(?P<hours>[0-9]{1,9})H)?(?:(?P<minutes>[0-9]{1,9})M)?(?:(?P<seconds>[0-9]{1,9})S)?)?",
    re.ASCII,
)
# Longer than any real schedule needs, and far from timedelta's own limit (a 500 before).
MAX_DURATION = timedelta(days=36525)
_UNITS = (("W", 604800), ("D", 86400), ("H", 3600), ("M", 60), ("S", 1))


def parse_duration(text: str, loc: Loc = ()) -> timedelta:
    """Parse `P1W`, `P1D`, `PT1H30M`, `PT90S`, `P1DT2H`; years, months, fractions rejected."""
    if not isinstance(text, str):
        raise CalendarError("duration must be an ISO-8601 string such as 'PT30M'", loc)
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "") or text.endswith("T"):
        raise CalendarError(_explain(text), loc)
    parts = {name: int(value) for name, value in match.groupdict().items() if value is not None}
    try:
        value = timedelta(**parts)
    except OverflowError:
        value = MAX_DURATION + timedelta(1)
    if value > MAX_DURATION:
        raise CalendarError(f"duration {text!r} is too long (at most 100 years)", loc, "VALIDATION")
    return value


def _explain(text: str) -> str:
    # Months and years have no fixed length, so say so instead of a generic message.
    date_part = text.partition("T")[0]
    if text.startswith("P") and ("Y" in date_part or "M" in date_part):
        return f"duration {text!r}: years and months are not allowed (they have no fixed length)"
    if "." in text or "," in text:
        return f"duration {text!r}: fractions are not allowed"
    return (
        f"duration {text!r} is not an ISO-8601 duration of weeks, days, hours, minutes "
        "and seconds (e.g. 'PT30M', 'P1D', 'PT1H30M')"
    )


def format_duration(td: timedelta) -> str:
    """Canonical ISO-8601 form: `PT1H30M`, `P1D`, `P2W`, `PT0S`; sub-second parts as `PT0.5S`."""
    if td < timedelta(0):
        raise ValueError("negative durations have no ISO-8601 form here")
    seconds, micros = divmod(td // timedelta(microseconds=1), 1_000_000)
    if seconds and not micros and seconds % 604800 == 0:
        return f"P{seconds // 604800}W"
    date_part, time_part = "", ""
    for unit, size in _UNITS[1:]:
        count, seconds = divmod(seconds, size)
        if unit == "S" and micros:
            time_part += f"{count}.{micros:06d}".rstrip("0") + "S"
        elif count and unit == "D":
            date_part += f"{count}D"
        elif count:
            time_part += f"{count}{unit}"
    if not date_part and not time_part:
        return "PT0S"
    return "P" + date_part + ("T" + time_part if time_part else "")
