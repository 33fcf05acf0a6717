"""Simulation: what a schedule would do over a window of time, computed and never done.

A pure event loop over the schedule's state (cursor, pending occurrence, buffer, remaining runs,
active runs) that ticks exactly when something can happen: at `from`, at every due time, and,
while an occurrence waits in the buffer, at the ticker's first tick after a run ended. Each tick
does what the ticker's tick does, in its order: the buffer drains (one occurrence), then runs whose
time is up end, then the due occurrences are decided. Every decision is one of the ticker's pure
functions in app/schedules/tick/policy.py, so the simulation and the ticker cannot disagree.
Namespace capacity is assumed free and every run lasts `run_duration` unless a newer start
cancels or terminates it. docs/schedules.md describes the answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import chain
from typing import Any

from app.calendar import Spec, due_time, format_utc_or_none
from app.calendar.occurrences import HORIZON
from app.schedules.tick.policy import (
    Occurrence,
    Skip,
    choose,
    due_occurrences,
    ends_now,
    exhausted,
    held,
    may_drain,
    overlap_outcome,
    run_id_for,
    scan_due,
    summarize_due,
)

MAX_ITEMS = 1000
TINY = timedelta(microseconds=1)
# Ticks fall on multiples of the tick period since the Unix epoch.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# An item's instants repeat (a start is often its due time, an end the next start).
_text = lru_cache(maxsize=8192)(format_utc_or_none)


@dataclass
class Item:
    """One occurrence the simulated ticker decided, and the run it started (if any)."""

    occurrence_time: datetime
    due_at: datetime
    outcome: str
    reason: str | None = None
    run_id: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    ends_runs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "occurrence_time": _text(self.occurrence_time),
            "due_at": _text(self.due_at),
            "outcome": self.outcome,
            "reason": self.reason,
            "run_id": self.run_id,
            "starts_at": _text(self.starts_at),
            "ends_at": _text(self.ends_at),
            "ends_runs": list(self.ends_runs),
        }


@dataclass(frozen=True)
class ActiveRun:
    """A run of the schedule that is active when the simulation starts."""

    run_id: str
    started_at: datetime
    leased: bool = False


@dataclass(frozen=True)
class Buffered:
    """An occurrence waiting in the schedule's buffer when the simulation starts."""

    instant: datetime
    origin: str = "scheduled"


@dataclass
class Start:
    """The schedule as the simulation starts from it: configuration and state."""

    schedule_id: str
    uid: str
    spec: Spec
    cursor: datetime
    overlap_policy: str = "skip"
    missed_policy: str = "skip"
    jitter_seconds: int = 0
    remaining_runs: int | None = None
    active: bool = True
    pending: datetime | None = None
    pending_until: datetime | None = None
    # The stored next occurrence and its due time, which a change may have held (`keep_due`).
    fire_at: Occurrence | None = None
    buffer: list[Buffered] = field(default_factory=list)
    runs: list[ActiveRun] = field(default_factory=list)


@dataclass
class Result:
    items: list[Item]
    truncated: bool
    max_concurrent: int

    def to_json(self) -> dict[str, Any]:
        counts = {"started": 0, "skipped": 0, "buffered": 0}
        for item in self.items:
            counts[item.outcome] += 1
        return {
            "items": [item.to_json() for item in self.items],
            "summary": {**counts, "max_concurrent": self.max_concurrent},
            "truncated": self.truncated,
        }


@dataclass
class _Run:
    run_id: str
    ends_at: datetime
    leased: bool
    item: Item | None


def simulate(
    start: Start,
    window: tuple[datetime, datetime],
    run_duration: timedelta,
    grace: timedelta,
    tick_period: timedelta = timedelta(seconds=1),
    limit: int = MAX_ITEMS,
) -> Result:
    """Decide every occurrence the ticker would decide in `window` = [from, to), the ticker
    ticking every `tick_period` (on its multiples since the Unix epoch) and never late."""
    return _Simulation(start, run_duration, grace, tick_period, limit).run(*window)


class _Simulation:
    """The state one simulation moves forward; a tick at a time, as the ticker would."""

    def __init__(
        self,
        start: Start,
        run_duration: timedelta,
        grace: timedelta,
        tick_period: timedelta,
        limit: int,
    ):
        self.s, self.duration, self.grace, self.limit = start, run_duration, grace, limit
        self.period = tick_period
        self.now: datetime | None = None
        self.cursor, self.remaining, self.live = start.cursor, start.remaining_runs, start.active
        self.pending, self.pending_until = start.pending, start.pending_until
        self.buffer: deque[tuple[Buffered, Item]] = deque(
            (entry, self._buffered_item(entry)) for entry in start.buffer
        )
        # Occurrences buffered before the window are listed once something happens to them.
        self.unlisted = {id(item) for _, item in self.buffer}
        self.runs = [
            _Run(r.run_id, r.started_at + run_duration, r.leased, None) for r in start.runs
        ]
        self.items: list[Item] = []
        self.max_concurrent = 0
        self.stream: Iterator[Occurrence] = iter(())
        self.upcoming: Occurrence | None = None

    def run(self, begin: datetime, end: datetime) -> Result:
        # One stream of occurrences for the whole window; each tick resumes it where the last
        # one stopped (`summarize_due`), which is what `scan_due` computes from the cursor.
        s = self.s
        until = max(self.cursor, end) + HORIZON
        self.stream = due_occurrences(s.spec, s.uid, s.jitter_seconds, self.cursor, until)
        self.upcoming = held(next(self.stream, None), s.fire_at)
        now: datetime | None = begin
        while now is not None and now < end and len(self.items) <= self.limit:
            self._tick(now)
            self.now = now
            now = self._next_tick()
        self.items.sort(key=lambda item: item.occurrence_time)
        truncated = len(self.items) > self.limit
        return Result(self.items[: self.limit], truncated, self.max_concurrent)

    def _next_tick(self) -> datetime | None:
        """The next instant something can happen: a due time, or, while an occurrence waits
        in the buffer, the first tick after the earliest run end (a run that ended at the last
        tick ended in its deadline phase, after that tick's drain)."""
        if not self.live:
            return None
        candidates = [self.upcoming.due] if self.upcoming is not None else []
        if self.buffer:
            ended = min((run.ends_at for run in self.runs), default=self.now)
            if ended is not None:
                candidates.append(self._tick_after(ended))
        return min(candidates, default=None)

    def _tick_after(self, instant: datetime) -> datetime:
        """The ticker's first tick strictly after `instant`: the next multiple of its period."""
        since = instant - EPOCH
        return EPOCH + (since // self.period + 1) * self.period

    def _tick(self, now: datetime) -> None:
        """One tick in the ticker's order: the buffer drains, then runs whose time is up end
        (its deadline phase: a run ending at this very instant was still active while the
        buffer drained), then the due occurrences are decided. A buffer that a run ending now
        freed drains at the next tick, one tick period later."""
        self.runs = [run for run in self.runs if run.ends_at >= now]
        if not self.live:
            return
        self._drain(now)
        self.runs = [run for run in self.runs if run.ends_at > now]
        self.max_concurrent = max(self.max_concurrent, len(self.runs))
        due = self.upcoming is not None and self.upcoming.due <= now
        if self.live and (due or self.pending is not None):
            self._fire(now)

    def _drain(self, now: datetime) -> None:
        """The oldest buffered occurrence starts once no run of the schedule is active."""
        if may_drain(len(self.runs), len(self.buffer)):
            entry, item = self.buffer.popleft()
            self._list(item)
            self._start(now, run_id_for(self.s.schedule_id, entry.instant, entry.origin), item)
            self._block_if_finished()

    def _fire(self, now: datetime) -> None:
        s = self.s
        resumed = self.stream if self.upcoming is None else chain([self.upcoming], self.stream)
        scan = summarize_due(resumed, now)
        pending = None
        if self.pending is not None:
            pending = Occurrence(self.pending, self._due(self.pending))
        choice = choose(
            scan, s.missed_policy, self.cursor, pending, self.pending_until, now, self.grace
        )
        for skip in choice.skips:
            self._skip_range(skip)
        # Capacity is free: a retried pending occurrence is decided now, never refused again.
        self.pending = self.pending_until = None
        if choice.cursor is not None and choice.cursor > self.cursor:
            self.cursor = choice.cursor
        if choice.candidate is not None:
            self._act(now, choice.candidate)
        if self.live:
            self.upcoming = scan.upcoming
            self._block_if_finished()

    def _block_if_finished(self) -> None:
        """No occurrence after the cursor: the ticker blocks it (`calendar_exhausted`), once
        the occurrences still in its buffer have drained."""
        if self.upcoming is None and self.pending is None and not self.buffer:
            self.live = False

    def _act(self, now: datetime, candidate: Occurrence) -> None:
        """The overlap policy decides the occurrence, as `act` does for the ticker."""
        item = Item(candidate.instant, candidate.due, "started")
        self.items.append(item)
        decision, reason = overlap_outcome(self.s.overlap_policy, len(self.runs), len(self.buffer))
        if decision == "skip":
            item.outcome, item.reason = "skipped", reason
        elif decision == "buffer":
            item.outcome = "buffered"
            self.buffer.append((Buffered(candidate.instant), item))
        else:
            item.ends_runs = self._end_others(now)
            self._start(now, run_id_for(self.s.schedule_id, candidate.instant), item)

    def _end_others(self, now: datetime) -> list[str]:
        ended, kept = [], []
        for run in self.runs:
            if ends_now(self.s.overlap_policy, run.leased):
                ended.append(run.run_id)
                if run.item is not None:
                    run.item.ends_at = now
            else:
                kept.append(run)
        self.runs = kept
        return ended

    def _start(self, now: datetime, run_id: str, item: Item) -> None:
        item.run_id, item.starts_at, item.ends_at = run_id, now, now + self.duration
        self.runs.append(_Run(run_id, now + self.duration, False, item))
        self.max_concurrent = max(self.max_concurrent, len(self.runs))
        if self.remaining is not None:
            self.remaining -= 1
        if exhausted(self.remaining):
            self._delete(now)

    def _delete(self, now: datetime) -> None:
        """`max_runs` reached: the period closes and the buffer is dropped, as the ticker does."""
        closing = scan_due(self.s.spec, self.s.uid, 0, self.cursor, now)
        if closing.count and closing.first is not None and closing.last is not None:
            self._skip_range(
                Skip(closing.first.instant, closing.last.instant, closing.count, "deleted")
            )
        self.cursor = max(self.cursor, now)
        while self.buffer:
            _, item = self.buffer.popleft()
            item.outcome, item.reason = "skipped", "deleted"
            self._list(item)
        self.live = False

    def _skip_range(self, skip: Skip) -> None:
        s = self.s
        stream = due_occurrences(s.spec, s.uid, s.jitter_seconds, skip.first - TINY, skip.last)
        for occurrence in stream:
            self.items.append(Item(occurrence.instant, occurrence.due, "skipped", skip.reason))
            if len(self.items) > self.limit:
                return

    def _list(self, item: Item) -> None:
        if id(item) in self.unlisted:
            self.unlisted.discard(id(item))
            self.items.append(item)

    def _due(self, instant: datetime) -> datetime:
        return due_time(self.s.spec, self.s.uid, self.s.jitter_seconds, instant)

    def _buffered_item(self, entry: Buffered) -> Item:
        due = self._due(entry.instant) if entry.origin == "scheduled" else entry.instant
        return Item(entry.instant, due, "buffered")
