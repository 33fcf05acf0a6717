"""The firing decisions, as pure functions of a schedule's state and `now` (no session, no I/O).

The missed policy (`scan_due`, `choose`, `retry_until`), the overlap policy (`overlap_outcome`,
`ends_now`, `runs_freed`), buffers (`may_drain`), `max_runs` (`exhausted`), jitter (`due_time`
from the calendar) and run ids. The tick, manual triggers, backfill and the simulation
(app/schedules/simulate.py) all decide with these, so they cannot disagree.

The cursor is the last canonical occurrence accounted for: every canonical occurrence at or
before it is in the ledger, except `pending` (an occurrence refused for capacity that is retried
with the same run id until its grace ends).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from app.calendar import Spec, counted_run, due_time, next_occurrence, occurrences_between
from app.calendar.occurrences import HORIZON

BUFFER_LIMITS = {"buffer_one": 1, "buffer_all": 1000}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ENDS_OTHERS = ("cancel_other", "terminate_other")


@dataclass(frozen=True)
class Occurrence:
    """A canonical occurrence and its jittered due time."""

    instant: datetime
    due: datetime


@dataclass(frozen=True)
class Skip:
    """A skipped range of `count` canonical occurrences from `first` to `last`."""

    first: datetime
    last: datetime
    count: int
    reason: str


@dataclass
class DueScan:
    """The canonical occurrences after the cursor that are due at `now`, summarized."""

    count: int = 0
    first: Occurrence | None = None
    second: Occurrence | None = None
    previous: Occurrence | None = None
    last: Occurrence | None = None
    # The first occurrence after the due ones: the next to fire once those are accounted for.
    upcoming: Occurrence | None = None


@dataclass
class Choice:
    """What the missed policy keeps: skipped ranges, one candidate, and the new cursor."""

    skips: list[Skip] = field(default_factory=list)
    candidate: Occurrence | None = None
    retry: bool = False
    cursor: datetime | None = None


def run_id_for(schedule_id: str, instant: datetime, origin: str = "scheduled") -> str:
    """Deterministic run ids: canonical time, backfill time, or manual epoch milliseconds."""
    if origin == "manual":
        millis = (instant - EPOCH) // timedelta(milliseconds=1)
        return f"schedule:{schedule_id}:manual:{millis}"
    stamp = _run_id_stamp(instant)
    if origin == "backfill":
        return f"schedule:{schedule_id}:backfill:{stamp}"
    return f"schedule:{schedule_id}:{stamp}"


@lru_cache(maxsize=4096)
def _run_id_stamp(instant: datetime) -> str:
    # Cached: a tick's page fires many schedules at the same few instants.
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def next_after(spec: Spec, uid: str, jitter_seconds: int, after: datetime) -> Occurrence | None:
    """The first canonical occurrence strictly after `after`, with its due time."""
    instant = next_occurrence(spec, after)
    if instant is None:
        return None
    return Occurrence(instant, due_time(spec, uid, jitter_seconds, instant))


def scan_due(spec: Spec, uid: str, jitter_seconds: int, cursor: datetime, now: datetime) -> DueScan:
    """One pass over the occurrences after `cursor`: the due ones, summarized in constant
    memory, and the first one not yet due."""
    until = max(cursor, now) + HORIZON
    # A due time is at most jitter_seconds after its occurrence, so every occurrence up to
    # now - jitter is due: a lone interval or cron line counts those without walking them (a
    # backlog of a one-second interval is 86,400 a day) and walks only the few after them.
    settled = counted_run(spec, cursor, now - timedelta(seconds=jitter_seconds))
    if settled is None:
        return summarize_due(due_occurrences(spec, uid, jitter_seconds, cursor, until), now)
    count, (first, second), (previous, last) = settled

    def at(instant: datetime) -> Occurrence:
        return Occurrence(instant, due_time(spec, uid, jitter_seconds, instant))

    scan = DueScan(count, at(first), at(second), at(previous), at(last))
    rest = summarize_due(due_occurrences(spec, uid, jitter_seconds, last, until), now)
    scan.count += rest.count
    if rest.count == 1:
        scan.previous, scan.last = scan.last, rest.last
    elif rest.count > 1:
        scan.previous, scan.last = rest.previous, rest.last
    scan.upcoming = rest.upcoming
    return scan


def kept_due(new_due: datetime, old_due: datetime, now: datetime) -> datetime:
    """The next occurrence's due time after a change that kept the cursor but moved it (a
    lower jitter): the new time, unless that has passed; then no earlier than the old time or
    the change's `now`, whichever came first. Due in the past, a tick would call it missed."""
    return max(new_due, min(old_due, now))


def held(occurrence: Occurrence | None, fire_at: Occurrence | None) -> Occurrence | None:
    """`occurrence`, due no earlier than `fire_at` (the stored next occurrence and
    `next_fire_at`) when it is that occurrence: what `kept_due` decided stands."""
    if occurrence is None or fire_at is None or occurrence.instant != fire_at.instant:
        return occurrence
    return fire_at if fire_at.due > occurrence.due else occurrence


def hold(scan: DueScan, fire_at: Occurrence | None) -> DueScan:
    """`scan` with its first occurrence `held`; due times still increase, since a kept due
    time is never later than the new or the old jittered time, both before the next one."""
    if scan.first is None or held(scan.first, fire_at) is scan.first:
        return scan
    return replace(
        scan,
        first=held(scan.first, fire_at),
        second=held(scan.second, fire_at),
        previous=held(scan.previous, fire_at),
        last=held(scan.last, fire_at),
    )


def due_occurrences(
    spec: Spec, uid: str, jitter_seconds: int, after: datetime, until: datetime
) -> Iterator[Occurrence]:
    """The canonical occurrences in (after, until] with their due times, lazily, in order."""
    stream = occurrences_between(spec, after, until)
    if jitter_seconds == 0 and not isinstance(jitter_seconds, bool):
        # Each occurrence is due at its own instant (what `due_time` answers without jitter):
        # a long backlog is walked without a call per occurrence, at about twice the pace.
        for instant in stream:
            yield Occurrence(instant, instant)
        return
    current = next(stream, None)
    while current is not None:
        following = next(stream, None)
        yield Occurrence(current, due_time(spec, uid, jitter_seconds, current, following))
        current = following


def summarize_due(stream: Iterator[Occurrence], now: datetime) -> DueScan:
    """Consume `stream` up to its first occurrence not due at `now` (kept as `upcoming`).

    A caller that keeps one stream across ticks (the simulation) resumes it with `upcoming`.
    """
    scan = DueScan()
    for occurrence in stream:
        # Due times increase with canonical times, so the first one not due ends the scan.
        if occurrence.due > now:
            scan.upcoming = occurrence
            return scan
        scan.count += 1
        if scan.count == 1:
            scan.first = occurrence
        elif scan.count == 2:
            scan.second = occurrence
        scan.previous, scan.last = scan.last, occurrence
    return scan


def choose(
    scan: DueScan,
    missed_policy: str,
    cursor: datetime,
    pending: Occurrence | None,
    pending_until: datetime | None,
    now: datetime,
    grace: timedelta,
) -> Choice:
    """Apply the missed policy: which occurrence may fire now, which become skipped ranges."""
    choice = Choice(cursor=cursor)
    if pending is not None:
        # A refused occurrence is retried until its grace ends or a newer one is due.
        if scan.count == 0 and pending_until is not None and now < pending_until:
            choice.candidate, choice.retry = pending, True
            return choice
        choice.skips.append(Skip(pending.instant, pending.instant, 1, "capacity"))
    if scan.count == 0:
        return choice
    assert scan.first is not None and scan.last is not None
    choice.cursor = scan.last.instant
    older: tuple[Occurrence | None, Occurrence | None, int]
    if missed_policy == "fire_once":
        choice.candidate = scan.first
        older = (scan.second, scan.last, scan.count - 1)
    elif now < scan.last.due + grace:
        choice.candidate = scan.last
        older = (scan.first, scan.previous, scan.count - 1)
    else:
        older = (scan.first, scan.last, scan.count)
    first, last, count = older
    if count > 0 and first is not None and last is not None:
        choice.skips.append(Skip(first.instant, last.instant, count, "missed"))
    return choice


def retry_until(
    missed_policy: str, candidate: Occurrence, now: datetime, grace: timedelta
) -> datetime:
    """When a capacity-refused occurrence stops being retried (the end of its grace)."""
    if missed_policy == "fire_once":
        # A late occurrence fired by fire_once gets its grace from its first attempt.
        return max(candidate.due, now) + grace
    return candidate.due + grace


def overlap_outcome(policy: str, active_runs: int, buffered: int) -> tuple[str, str | None]:
    """`start`, `buffer` or `skip` (with its reason) for one occurrence under `policy`."""
    if policy == "skip":
        return ("skip", "overlap_policy_skip") if active_runs else ("start", None)
    if policy in BUFFER_LIMITS:
        if not active_runs and not buffered:
            return "start", None
        if buffered < BUFFER_LIMITS[policy]:
            return "buffer", None
        return "skip", "buffer_full"
    return "start", None


def ends_now(policy: str, leased: bool) -> bool:
    """Whether a start under `policy` ends one of the schedule's active runs at once.

    `terminate_other` ends every run; `cancel_other` ends a run that is between steps, while a
    leased one (executing a step) stops at its next step boundary.
    """
    if policy == "terminate_other":
        return True
    return policy == "cancel_other" and not leased


def runs_freed(policy: str, leased: Sequence[bool]) -> int:
    """How many of the schedule's active runs (`leased` flags) a start under `policy` frees now:
    runs ended now free their place in the namespace."""
    return sum(1 for held in leased if ends_now(policy, held))


def may_drain(active_runs: int, buffered: int) -> bool:
    """A buffered occurrence starts (oldest first) only once no run of the schedule is active."""
    return buffered > 0 and active_runs == 0


def exhausted(remaining_runs: int | None) -> bool:
    """`max_runs` reached: the schedule deletes itself once `remaining_runs` is 0."""
    return remaining_runs is not None and remaining_runs <= 0
