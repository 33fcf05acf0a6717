"""Splitting a backfill range into requests the server accepts (at most 1000 occurrences each).

The client cannot count a calendar's occurrences itself (the calendar lives on the server), so it
asks for the whole range and halves any part the server refuses with BACKFILL_TOO_LARGE: the
refusal writes nothing, and the parts are sent in time order, so the runs start oldest first.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from almanac.errors import AlmanacError
from almanac.models import BackfillResult

TOO_LARGE = "BACKFILL_TOO_LARGE"
SMALLEST_PART = timedelta(seconds=1)


def to_datetime(value: datetime | str) -> datetime:
    """An aware UTC datetime from a datetime or an ISO-8601 string (`Z` allowed)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"not an ISO-8601 instant: {value!r}") from exc
    if value.tzinfo is None:
        raise ValueError(f"the instant {value.isoformat()} needs a time zone (e.g. Z)")
    return value.astimezone(UTC)


class RangeSplitter:
    """The parts of [start, end) still to send, oldest first; halves a part when refused."""

    def __init__(self, start: datetime | str, end: datetime | str) -> None:
        self.start, self.end = to_datetime(start), to_datetime(end)
        self.pending = [(self.start, self.end)]
        self.covered = timedelta(0)
        self.results: list[dict[str, Any]] = []
        self.requests = 0

    def next_part(self) -> tuple[datetime, datetime] | None:
        return self.pending[-1] if self.pending else None

    def refused(self, error: AlmanacError) -> None:
        """The server refused the current part: split it, or give up if it cannot be split."""
        # A refused request was still sent: `requests` counts every one, not just the accepted.
        self.requests += 1
        start, end = self.pending[-1]
        if error.code != TOO_LARGE or end - start <= SMALLEST_PART:
            raise error
        middle = start + (end - start) / 2
        middle = middle.replace(microsecond=0) if middle - start > SMALLEST_PART else middle
        self.pending[-1:] = [(middle, end), (start, middle)]

    def accepted(self, body: dict[str, Any]) -> None:
        start, end = self.pending.pop()
        self.covered += end - start
        self.results.append(body)
        self.requests += 1

    @property
    def fraction(self) -> float:
        total = (self.end - self.start).total_seconds()
        return 1.0 if total <= 0 else self.covered.total_seconds() / total

    def summary(self) -> BackfillResult:
        """One result summing every accepted request; `requests` counts every request sent."""
        body = {
            "results": [item for part in self.results for item in part.get("results", [])],
            "started": sum(int(part.get("started", 0)) for part in self.results),
            "skipped": sum(int(part.get("skipped", 0)) for part in self.results),
            "requests": self.requests,
        }
        return BackfillResult.from_json(body)
