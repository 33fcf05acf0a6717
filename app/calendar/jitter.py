"""Deterministic jitter: every replica derives the same delay for the same occurrence."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from app.calendar.errors import CalendarError
from app.calendar.instants import MAX_INSTANT, format_utc, require_utc
from app.calendar.occurrences import next_occurrence as find_next_occurrence
from app.calendar.spec import Spec

MAX_JITTER_SECONDS = 3600


def jitter_offset(
    uid: str, occurrence: datetime, jitter_seconds: int, next_occurrence: datetime | None
) -> timedelta:
    """hash(uid, occurrence) mod (jitter_seconds + 1), capped strictly before `next_occurrence`."""
    check_jitter_seconds(jitter_seconds)
    if jitter_seconds == 0:
        return timedelta(0)
    # A stable digest, not hash(): str hashes are salted per process.
    digest = hashlib.blake2b(f"{uid}|{format_utc(occurrence)}".encode(), digest_size=8).digest()
    seconds = int.from_bytes(digest, "big") % (jitter_seconds + 1)
    if next_occurrence is not None:
        gap = require_utc(next_occurrence, ("next_occurrence",)) - require_utc(
            occurrence, ("occurrence",)
        )
        # The largest whole number of seconds that is still strictly less than the gap.
        seconds = min(seconds, max(0, (gap - timedelta(microseconds=1)) // timedelta(seconds=1)))
    else:
        # The last occurrence has no next one to stay before, but stays within the instants a
        # clock can reach (else it was announced and never fired).
        room = MAX_INSTANT - require_utc(occurrence, ("occurrence",))
        seconds = min(seconds, max(0, room // timedelta(seconds=1)))
    return timedelta(seconds=seconds)


def due_time(
    spec: Spec,
    uid: str,
    jitter_seconds: int,
    occurrence: datetime,
    following: datetime | None = None,
) -> datetime:
    """The jittered due time of the canonical `occurrence` of `spec`.

    `following` is the next canonical occurrence when the caller already knows it (a scan over
    consecutive occurrences does); None means "look it up".
    """
    check_jitter_seconds(jitter_seconds)
    occurrence = require_utc(occurrence, ("occurrence",))
    if jitter_seconds == 0:
        return occurrence
    if following is None:
        following = find_next_occurrence(spec, occurrence)
    return occurrence + jitter_offset(uid, occurrence, jitter_seconds, following)


def check_jitter_seconds(jitter_seconds: int) -> None:
    """Raise CalendarError unless `jitter_seconds` is an integer in 0..3600."""
    valid = isinstance(jitter_seconds, int) and not isinstance(jitter_seconds, bool)
    if not valid or not 0 <= jitter_seconds <= MAX_JITTER_SECONDS:
        raise CalendarError(
            f"jitter_seconds must be an integer from 0 to {MAX_JITTER_SECONDS}",
            ("jitter_seconds",),
        )
