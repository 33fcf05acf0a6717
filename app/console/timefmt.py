"""How the console writes instants: relative to the server's clock, and absolute in the zone the
reader chose (UTC or the schedule's own), which a cookie remembers."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from flask import request

TIME_COOKIE = "almanac_times"
SHOW_UTC, SHOW_ZONE = "utc", "zone"
# Closer to now than this reads "just now", in either direction.
JUST_NOW_SECONDS = 10


def relative(value: datetime | None, now: datetime) -> str:
    """ "just now", "45 s ago", "in 5 min", "2 h 10 min ago", "in 3 d": coarse, for scanning.

    Sizes are truncated, never rounded up, so "in 5 min" is never less than five minutes away.
    """
    if value is None:
        return "—"
    seconds = (value - now).total_seconds()
    size = int(abs(seconds))
    if size < JUST_NOW_SECONDS:
        return "just now"
    if size < 60:
        text = f"{size} s"
    elif size < 3600:
        text = f"{size // 60} min"
    elif size < 6 * 3600:
        hours, minutes = divmod(size // 60, 60)
        text = f"{hours} h {minutes} min" if minutes else f"{hours} h"
    elif size < 2 * 86400:
        text = f"{size // 3600} h"
    else:
        text = f"{size // 86400} d"
    return f"in {text}" if seconds > 0 else f"{text} ago"


def shown_zone() -> str:
    """The reader's choice: "utc" (the default) or "zone" (each schedule's own time zone)."""
    return SHOW_ZONE if request.cookies.get(TIME_COOKIE) == SHOW_ZONE else SHOW_UTC


def utc(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def in_zone(value: datetime | None, zone: str) -> str:
    if value is None:
        return "—"
    return value.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M:%S %z ({zone})")


def absolute(value: datetime | None, zone: str | None = None) -> str:
    """The instant in the chosen display: UTC, or `zone` when the reader chose schedule zones."""
    if value is None:
        return "—"
    if zone and zone != "UTC" and shown_zone() == SHOW_ZONE:
        return in_zone(value, zone)
    return utc(value)


def other(value: datetime | None, zone: str | None = None) -> str:
    """The display not chosen (for the hover text), or "" when both are UTC."""
    if value is None or not zone or zone == "UTC":
        return ""
    return utc(value) if shown_zone() == SHOW_ZONE else in_zone(value, zone)
