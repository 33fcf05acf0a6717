"""Instants and time zones: strict parsing, UTC normalisation and canonical text forms."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from app.calendar.errors import CalendarError, Loc

_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*", re.ASCII)
# Files under the tz path that are not portable IANA names: machine-local or leap-second variants.
_NOT_ZONES = frozenset({"localtime", "posixrules"})
_NOT_ZONE_PREFIXES = ("posix/", "right/")


def validate_timezone(name: str, loc: Loc = ("timezone",)) -> ZoneInfo:
    """Return the IANA zone called `name`; unknown or non-portable names raise CalendarError."""
    if isinstance(name, str):
        zone = _load_zone(name)
        if zone is not None:
            return zone
        near = _zone_names().get(name.strip().lower())
        if near is not None and _load_zone(near) is not None:
            raise CalendarError(f"unknown time zone {name!r}; did you mean {near!r}?", loc)
    raise CalendarError(f"unknown time zone {name!r}; use an IANA name like 'Europe/Berlin'", loc)


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    """Zone names by their lower case: IANA names are case-sensitive, people often are not."""
    return {name.lower(): name for name in available_timezones()}


@lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo | None:
    if not _ZONE_NAME.fullmatch(name) or name in _NOT_ZONES:
        return None
    if name.startswith(_NOT_ZONE_PREFIXES):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def require_utc(value: datetime, loc: Loc) -> datetime:
    """Return `value` in UTC; a naive datetime is a caller error (its zone would be a guess)."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise CalendarError("must be a timezone-aware datetime", loc)
    return value.astimezone(UTC)


# Instants a user may send: the epoch of intervals to well before `datetime.max`, so arithmetic
# on them (a scan ahead, a deadline) never overflows.
MIN_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(9000, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def check_instant_range(value: datetime, loc: Loc = ()) -> datetime:
    """`value` if it lies within 1970-01-01 … 9000-12-31 (UTC), else a VALIDATION error."""
    if not MIN_INSTANT <= value <= MAX_INSTANT:
        msg = "must be between 1970-01-01T00:00:00Z and 9000-12-31T23:59:59Z"
        raise CalendarError(msg, loc, "VALIDATION")
    return value


# What Python's reader takes that ISO-8601 does not: a separator other than `T` (or RFC 3339's
# space) after an extended date, a blank before the offset, a decimal mark with no digits.
_NOT_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[^Tt ]|\s[Zz+\-]|[.,](?!\d)")
# A fraction of a second: Python keeps six digits and drops the rest.
_FRACTION = re.compile(r"[.,](\d+)")


def parse_instant(text: str | datetime, loc: Loc = (), *, round_up: bool = False) -> datetime:
    """Parse ISO-8601 with an offset or `Z` (or RFC 3339's `z`) into an aware UTC datetime;
    naive text is rejected.

    Almanac keeps microseconds. Finer digits are dropped, which moves the instant earlier:
    right for an inclusive upper bound (`end_at`), wrong for a lower bound or an exclusive
    upper one (`start_at`, a backfill's `from` and `to`), which pass `round_up` to move it
    to the next microsecond instead, so no occurrence before the instant given is taken in.

    Instants outside 1970-01-01 … 9000-12-31 are refused (VALIDATION).
    """
    if isinstance(text, datetime):
        return check_instant_range(require_utc(text, loc), loc)
    if not isinstance(text, str):
        raise CalendarError("must be an ISO-8601 date-time string", loc)
    if _NOT_ISO.search(text):
        raise CalendarError(f"{text!r} is not an ISO-8601 date-time", loc)
    try:
        value = datetime.fromisoformat(text[:-1] + "Z" if text.endswith("z") else text)
    except ValueError:
        raise CalendarError(f"{text!r} is not an ISO-8601 date-time", loc) from None
    if value.utcoffset() is None:
        raise CalendarError(f"{text!r} has no UTC offset; add 'Z' or an offset like '+02:00'", loc)
    fraction = _FRACTION.search(text)
    if round_up and fraction is not None and fraction.group(1)[6:].strip("0"):
        value += timedelta(microseconds=1)
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = MIN_INSTANT - timedelta(days=1) if value.year < 1970 else MAX_INSTANT + timedelta(1)
    return check_instant_range(utc, loc)


def same_instant(first: Any, second: Any) -> bool:
    """Whether two instants as given name the same time, digits finer than a microsecond too
    (both read as `parse_instant` reads them; anything it refuses is not the same)."""
    try:
        if parse_instant(first) != parse_instant(second):
            return False
    except CalendarError:
        return False
    return _finer_digits(first) == _finer_digits(second)


def _finer_digits(value: Any) -> str:
    fraction = _FRACTION.search(value) if isinstance(value, str) else None
    return fraction.group(1)[6:].rstrip("0") if fraction else ""


def format_utc(dt: datetime) -> str:
    """`2026-03-08T07:00:00Z` (microseconds only when present)."""
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def format_utc_or_none(dt: datetime | None) -> str | None:
    """`format_utc`, with None (an instant not set) passed through."""
    return None if dt is None else format_utc(dt)


def format_offset(offset: timedelta | None) -> str:
    """`-04:00`, `+05:30`, `+00:00`; seconds only for historical offsets that have them."""
    total = int((offset or timedelta(0)).total_seconds())
    sign = "-" if total < 0 else "+"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text
