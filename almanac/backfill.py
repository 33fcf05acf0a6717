"""Splitting a backfill range into requests the server accepts (at most 1000 occurrences each).

The client cannot count a calendar's occurrences itself (the calendar lives on the server), so it
asks for the whole range and halves any part the server refuses with BACKFILL_TOO_LARGE: the
refusal writes nothing, and the parts are sent in time order, so the runs start oldest first.

A part may use up the schedule's `max_runs`: the server then deletes the schedule and refuses
the parts after it (SCHEDULE_DELETED). The occurrences of those parts are reported as skipped
for `max_runs_exhausted`, as one request over the whole range reports them, listed from the
calendar preview of the schedule's spec (the client cannot compute a calendar itself).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from almanac.errors import AlmanacError
from almanac.models import BackfillResult, PreviewOccurrence, Schedule

TOO_LARGE = "BACKFILL_TOO_LARGE"
DELETED = "SCHEDULE_DELETED"
EXHAUSTED = "max_runs_exhausted"
SMALLEST_PART = timedelta(seconds=1)
# The most due times one calendar preview answers.
PREVIEW_PAGE = 100


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


def ran_out(schedule: Schedule) -> bool:
    """Whether the schedule deleted itself by starting the last of its `max_runs`; one deleted
    by someone before then still has runs left (or no `max_runs` at all)."""
    return schedule.status == "deleted" and schedule.remaining_runs == 0


def skipped(occurrence_time: str) -> dict[str, Any]:
    """The server's backfill result for an occurrence after the last of `max_runs`."""
    return {
        "occurrence_time": occurrence_time,
        "outcome": "skipped",
        "reason": EXHAUSTED,
        "run_id": None,
    }


class Remainder:
    """The occurrences in [start, end) as skips for `max_runs_exhausted`, read page by page from
    the calendar preview: `after` is where the next page starts, None once every one is read."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.end = end
        # The preview answers due times strictly after `after`; the range holds `start`.
        self.after: datetime | None = start - timedelta(microseconds=1)
        self.results: list[dict[str, Any]] = []

    def add(self, page: list[PreviewOccurrence]) -> None:
        inside = [item for item in page if item.at is not None and item.at < self.end]
        # The server's own text for each instant, as its backfill results hold it.
        self.results += [skipped(item.raw["at"]) for item in inside]
        more = len(page) == PREVIEW_PAGE and len(inside) == len(page)
        self.after = page[-1].at if more else None


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

    def may_have_run_out(self, error: AlmanacError) -> bool:
        """Whether `error` may mean an earlier part used up `max_runs`: the server deletes the
        schedule as it starts its last run, then refuses the next part as SCHEDULE_DELETED."""
        return error.code == DELETED and bool(self.results)

    def rest(self) -> Remainder:
        """The parts not sent yet, oldest first: together they are [current part's start, end)."""
        return Remainder(self.pending[-1][0], self.end)

    def ran_out(self, rest: Remainder) -> None:
        """The current part was refused because the schedule ran out of runs: everything left
        is skipped for `max_runs_exhausted`, and no part is left to send."""
        self.requests += 1
        self.results.append({"results": rest.results, "started": 0, "skipped": len(rest.results)})
        self.covered = self.end - self.start
        self.pending.clear()

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
