"""Preview (docs/calendar.md): the next due times of a spec with the DST story of each one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from app.calendar.errors import CalendarError
from app.calendar.instants import format_offset, format_utc, require_utc
from app.calendar.jitter import check_jitter_seconds, due_time
from app.calendar.occurrences import HORIZON, iter_occurrences
from app.calendar.spec import Spec

MAX_PREVIEW_COUNT = 100


@dataclass(frozen=True)
class PreviewItem:
    """One due time: UTC, local wall clock, offset, DST note, and the canonical occurrence."""

    at: datetime
    local: datetime
    utc_offset: str
    note: str | None
    canonical: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": format_utc(self.at),
            "local": self.local.isoformat(),
            "utc_offset": self.utc_offset,
            "note": self.note,
        }

    def moved(self, at: datetime, zone: Any) -> PreviewItem:
        """The same occurrence due at `at` instead."""
        local = at.astimezone(zone)
        return PreviewItem(at, local, format_offset(local.utcoffset()), self.note, self.canonical)


def preview(
    spec: Spec, after: datetime, count: int = 10, *, uid: str = "", jitter_seconds: int = 0
) -> list[PreviewItem]:
    """The due times of the next `count` (1..100) occurrences strictly after `after`: what a
    schedule saved at `after` fires, its jitter drawn from `uid`. An occurrence at or before
    `after` is not listed even when its jitter would put it later: a save starts its schedule
    after it, so it never fires (a saved schedule's own forecast starts at its cursor)."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise CalendarError("count must be an integer", ("count",))
    if not 1 <= count <= MAX_PREVIEW_COUNT:
        raise CalendarError(f"count must be from 1 to {MAX_PREVIEW_COUNT}", ("count",))
    check_jitter_seconds(jitter_seconds)
    after = require_utc(after, ("after",))
    items = _due_items(spec, after, uid, jitter_seconds)
    return list(islice(items, count))


def _due_items(spec: Spec, after: datetime, uid: str, jitter_seconds: int) -> Iterator[PreviewItem]:
    # The save's range check: 50 years from max(after, start_at), so a spec starting later
    # than that still shows the occurrence its save found (start_at is at most year 9000).
    first = after if spec.start_at is None else max(after, spec.start_at)
    stream = iter_occurrences(spec, after, first + HORIZON)
    current = next(stream, None)
    while current is not None:
        following = next(stream, None)
        canonical, note = current
        next_canonical = None if following is None else following[0]
        # The same due time the tick computes (past the horizon it looks the next one up).
        at = due_time(spec, uid, jitter_seconds, canonical, next_canonical)
        local = at.astimezone(spec.zone)
        yield PreviewItem(at, local, format_offset(local.utcoffset()), note, canonical)
        current = following
