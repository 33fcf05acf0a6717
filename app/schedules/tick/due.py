"""Firing due schedules: claim pages, decide per schedule, write each page at once.

A page is claimed with `FOR UPDATE SKIP LOCKED` on PostgreSQL (replicas take different pages)
and under `BEGIN IMMEDIATE` on SQLite. Everything one firing writes (the run and its first
events, the ledger row, the audit event, the counters and the cursor) is in its page's
transaction, so a crash leaves all of it or none. Namespaces take turns, page by page.
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, cast

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import CalendarError, Spec, due_time, format_utc_or_none, parse_instant
from app.db import Database, Namespace, Schedule, rollup
from app.db.bulk import Statement, combine, execute
from app.db.session import begin_write
from app.schedules.ledger import Writes, record_skip
from app.schedules.store import spec_of
from app.schedules.tick import rows as schedule_rows
from app.schedules.tick.act import act
from app.schedules.tick.context import FiringContext
from app.schedules.tick.policy import (
    Choice,
    DueScan,
    Occurrence,
    Skip,
    choose,
    hold,
    retry_until,
    scan_due,
)
from app.schedules.tick.rows import ScheduleRow
from app.schedules.tick.starts import BulkStarter, Firing
from app.schedules.transitions import block, fire_at, nothing_left, reschedule

log = logging.getLogger(__name__)

PAGE_SIZE = 500
# Pages written at once on PostgreSQL by default, each on its own connection (see `_Pipeline`;
# `ALMANAC_TICK_WRITERS`), once a phase has handed `SOLO_PAGES` full pages to a writer one at a
# time. A second writer fires a large burst faster (10,000 firings 8-25% faster in
# bench/tick_bench.py), but where two tickers share two cores with the rest of a deployment it
# makes a small burst's last commit later; a burst of up to `SOLO_PAGES` pages per ticker is
# written one page at a time (docs/schedules.md, "Overlapping pages").
WRITERS = 2
SOLO_PAGES = 2
# Rotates the namespace that goes first, so a short budget does not always favour one.
_turns = itertools.count()


def fire_due(
    db: Database,
    now: datetime,
    grace: timedelta,
    *,
    budget_deadline: float,
    on_page: Callable[[int], None] | None = None,
    recheck: Callable[[Session], datetime] | None = None,
    writers: int = WRITERS,
) -> list[dict[str, Any]]:
    """Fire every due schedule, page by page and namespace by namespace, within the budget.

    `on_page(claimed)` is called after each page commits (the benchmark times them).
    `recheck(session)` reads the clock again right before a page commits (see `_stale_at`).

    On PostgreSQL, once a page comes back full, pages overlap: while up to `writers` pages'
    statements and commits run on writer threads (each with its connection), the next page is
    claimed and decided here. See `_Pipeline` for why that cannot double, lose or misjudge a firing.
    """
    rows: list[dict[str, Any]] = []
    with db.session() as session:
        # Only the namespaces the tick bound this phase to (by name, not only by row security,
        # which a superuser login bypasses: each namespace's turn then fired every one).
        namespaces = schedule_rows.due_namespaces(session, now, db.scope.ids)
    if not namespaces:
        return rows
    turn = next(_turns) % len(namespaces)
    namespaces = namespaces[turn:] + namespaces[:turn]
    keys: dict[int, tuple[datetime, int] | None] = dict.fromkeys(namespaces)
    pipeline = _Pipeline(db, now, grace, rows, budget_deadline, on_page, recheck, writers)
    try:
        while namespaces and time.monotonic() < budget_deadline:
            for namespace_id in list(namespaces):
                page = pipeline.decide(namespace_id, keys[namespace_id])
                claimed = 0 if page is None else page.size
                if page is not None:
                    keys[namespace_id] = page.last_key
                    if page.claimed:
                        pipeline.write(page, overlap=claimed == PAGE_SIZE and not db.is_sqlite)
                    else:  # all decided earlier this phase
                        page.stack.close()
                if (page is None or not page.claimed) and on_page is not None:
                    on_page(0)
                if claimed < PAGE_SIZE:
                    namespaces.remove(namespace_id)
                if time.monotonic() >= budget_deadline:
                    break
    except BaseException:
        pipeline.finish(failing=True)
        raise
    pipeline.finish()
    return rows


@dataclass
class _Page:
    """One claimed page between its decisions and its commit: the open transaction and what
    it will write."""

    stack: ExitStack
    session: Session
    now: datetime
    namespace_id: int
    key: tuple[datetime, int] | None
    # The schedules to decide: those the claim returned, less any decided earlier this phase.
    claimed: list[ScheduleRow]
    # How many the claim returned (a full page means more may be due), and the last one's key.
    size: int = 0
    end: tuple[datetime, int] | None = None
    fired: list[ScheduleRow] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    writes: Writes = field(default_factory=Writes)
    starter: BulkStarter | None = None
    # PostgreSQL: the page's inserts and updates, built by the deciding thread (`_prepare`).
    statements: list[Statement] | None = None

    # (next_fire_at, id) of each claimed schedule as claimed (firing moves next_fire_at).
    keys: list[tuple[datetime, int]] = field(default_factory=list)

    @property
    def last_key(self) -> tuple[datetime, int]:
        """Where the next page starts: after the last schedule this page fired, or after
        everything it claimed once it decided all it had to."""
        if len(self.fired) == len(self.claimed) and self.end is not None:
            return self.end
        return self.keys[max(len(self.fired), 1) - 1]


class _Pipeline:
    """Decides pages here and writes them on writer threads, `writers` at a time.

    Page N+1 is claimed and decided while page N is written (with two writers, once the
    phase's first `SOLO_PAGES` pages have been handed over one at a time, page N+2 while pages
    N and N+1 are, each on its own connection: `writers` pages in flight at most).
    That is safe:
    - Each page claims after the last key of the one before with `SKIP LOCKED`, and a page
      holds its rows' locks until it commits, so no schedule is in two pages; a page redone
      after a stale start or a run id clash re-claims its rows after its old key, skipping
      the locked rows of the pages in flight.
    - A decision reads nothing the pages in flight write, except the namespace's count of
      active runs (`max_active_runs`): before counting, it waits for every page in flight to
      commit (`settle`), so the count is the one a serial tick would read. Without a limit
      nothing is counted.
    - A schedule is decided once per phase. A refused one with older occurrences missed keeps
      its latest occurrence due, which sorts after where it was claimed: a later page claims
      it again and leaves it as it is (`seen`).
    - Pages in flight write disjoint rows; they meet only on the run counts and the ticker's
      beat, which each takes last, in one order, at commit (so one waits, none deadlocks).
    - Each page makes its final clock check before it commits. A failed page raises here once
      the pages in flight have ended and the page decided meanwhile is rolled back (that
      phase then fails as a whole, as before: committed pages stay, the rest stays due).
    SQLite has one writer: pages there never overlap.
    """

    def __init__(
        self,
        db: Database,
        now: datetime,
        grace: timedelta,
        rows: list[dict[str, Any]],
        budget_deadline: float,
        on_page: Callable[[int], None] | None,
        recheck: Callable[[Session], datetime] | None,
        writers: int = WRITERS,
        seen: set[int] | None = None,
        own: frozenset[int] = frozenset(),
    ) -> None:
        self.writers = max(1, writers)
        # The schedules decided this phase (ids), but for `own`: a page redone decides its own
        # schedules again.
        self.seen: set[int] = set() if seen is None else seen
        self.own = own
        self.db, self.now, self.grace, self.rows = db, now, grace, rows
        self.budget_deadline, self.on_page, self.recheck = budget_deadline, on_page, recheck
        self.writer: ThreadPoolExecutor | None = None
        # Pages being written, oldest first (their rows are reported in page order).
        self.pending: deque[Future[list[dict[str, Any]]]] = deque()
        # Full pages handed to a writer thread so far: the first `SOLO_PAGES` go one at a time.
        self.handed = 0

    def decide(self, namespace_id: int, key: tuple[datetime, int] | None) -> _Page | None:
        """Claim the namespace's next page after `key` and decide its firings (nothing
        written yet); None when nothing is due there."""
        stack = ExitStack()
        try:
            session = stack.enter_context(self.db.session())
            begin_write(session)
            claimed = schedule_rows.claim(
                session, self.now, PAGE_SIZE, namespace_id=namespace_id, key=key
            )
            if not claimed:
                stack.close()
                return None
            seen, own = self.seen, self.own
            fresh = [s for s in claimed if s.id not in seen or s.id in own]
            end = (cast(datetime, claimed[-1].next_fire_at), claimed[-1].id)
            page = _Page(stack, session, self.now, namespace_id, key, fresh, len(claimed), end)
            if not fresh:
                return page
            page.keys = [(cast(datetime, s.next_fire_at), s.id) for s in fresh]
            _decide(page, self.grace, self.budget_deadline, self.settle)
            seen.update(s.id for s in page.fired)
            if not self.db.is_sqlite:
                _prepare(page)
            return page
        except BaseException:
            stack.__exit__(*sys.exc_info())
            self.settle()
            raise

    def settle(self) -> None:
        """Wait until the pages being written have committed (or failed)."""
        if self.pending:
            wait(list(self.pending))

    def write(self, page: _Page, *, overlap: bool) -> None:
        """Write `page` now, or on a writer thread when `overlap` (once fewer than `writers`
        pages are in flight, or than one while the phase's first `SOLO_PAGES` are handed); a
        failure of an earlier page raises here."""
        at_once = self.writers if self.handed >= SOLO_PAGES else 1
        try:
            while self.pending and (len(self.pending) >= at_once or not overlap):
                self._collect_oldest()
        except BaseException:
            page.stack.__exit__(*sys.exc_info())
            raise
        if not overlap:
            self.rows.extend(self._write(page))
            return
        if self.writer is None:
            self.writer = ThreadPoolExecutor(self.writers, thread_name_prefix="tick-writer")
        self.handed += 1
        self.pending.append(self.writer.submit(self._write, page))

    def _collect_oldest(self) -> None:
        self.rows.extend(self.pending.popleft().result())

    def finish(self, *, failing: bool = False) -> None:
        """Wait for every page in flight; raise the first failure (unless already `failing`:
        the failure being raised is the one to report)."""
        first: BaseException | None = None
        try:
            while self.pending:
                try:
                    self._collect_oldest()
                except BaseException as exc:  # noqa: BLE001 - the rest must still end
                    first = first or exc
        finally:
            if self.writer is not None:
                self.writer.shutdown(wait=True)
                self.writer = None
        if first is not None and not failing:
            raise first

    def _write(self, page: _Page) -> list[dict[str, Any]]:
        session = page.session
        try:
            _flush(page)
            # The run counts are written before the clock is read again: their rows may be
            # locked too, and a start that waited there past its grace must not commit.
            rollup.write_pending(session)
            later = _stale_at(session, page.now, page.rows, self.grace, self.recheck)
            if later is not None:
                # The page waited (on locks) past a start's grace: decide again at that time,
                # so the occurrence is recorded as missed instead of started stale.
                session.rollback()
                page.stack.close()
                rows: list[dict[str, Any]] = []
                _fire_page(
                    self.db,
                    later,
                    self.grace,
                    page.namespace_id,
                    page.key,
                    rows,
                    self.budget_deadline,
                    self.recheck,
                    self.seen,
                    frozenset(s.id for s in page.fired),
                )
                self._report(len(page.fired))
                return rows
            session.commit()
            page_rows = page.rows
        except IntegrityError:
            # Another writer already holds one of these run ids: redo the page one by one.
            session.rollback()
            page.stack.close()
            page_rows = _fire_each(self.db, page.now, self.grace, [s.id for s in page.fired])
        except BaseException:
            page.stack.__exit__(*sys.exc_info())
            raise
        page.stack.close()
        self._report(len(page.fired))
        return page_rows

    def _report(self, claimed: int) -> None:
        if self.on_page is not None:
            self.on_page(claimed)


def _fire_page(
    db: Database,
    now: datetime,
    grace: timedelta,
    namespace_id: int,
    key: tuple[datetime, int] | None,
    rows: list[dict[str, Any]],
    budget_deadline: float = float("inf"),
    recheck: Callable[[Session], datetime] | None = None,
    seen: set[int] | None = None,
    own: frozenset[int] = frozenset(),
) -> None:
    """One page, claimed, decided, written and committed here (no overlap): a page redone
    at a later time. It decides its `own` schedules again, none other `seen` this phase."""
    pipeline = _Pipeline(db, now, grace, rows, budget_deadline, None, recheck, 1, seen, own)
    page = pipeline.decide(namespace_id, key)
    if page is None:
        return
    if not page.claimed:
        page.stack.close()
        return
    pipeline.write(page, overlap=False)


def _stale_at(
    session: Session,
    now: datetime,
    rows: list[dict[str, Any]],
    grace: timedelta,
    recheck: Callable[[Session], datetime] | None,
) -> datetime | None:
    """The clock's time now, if a start of `rows` that was within its grace at `now` is past
    it by then; else None. (`fire_once` starts an overdue occurrence on purpose: not stale.)"""
    if recheck is None:
        return None
    ends = [
        parse_instant(r["occurrence_time"]) + grace for r in rows if r["outcome"] == "triggered"
    ]
    ends = [end for end in ends if end > now]
    if not ends:
        return None
    current = recheck(session)
    return current if current >= min(ends) else None


def _fire_each(
    db: Database, now: datetime, grace: timedelta, ids: list[int]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for pk in ids:
        with db.session() as session:
            begin_write(session)
            claimed = schedule_rows.claim(session, now, 1, pk=pk)
            if not claimed:
                continue
            try:
                fired, _done = _fire_schedules(session, now, grace, claimed)
                session.commit()
                rows.extend(fired)
            except IntegrityError:
                session.rollback()
                rows.extend(_skip_taken(db, now, grace, pk))
    return rows


def _skip_taken(db: Database, now: datetime, grace: timedelta, pk: int) -> list[dict[str, Any]]:
    """A run already holds the id this firing needs (it predates the reserved `schedule:`
    prefix, or another writer made it): record the occurrence as skipped and move the
    schedule on, so it never retries the same id forever."""
    with db.session() as session:
        begin_write(session)
        claimed = schedule_rows.claim(session, now, 1, pk=pk)
        if not claimed:
            return []
        schedule = cast(Schedule, claimed[0])
        namespace = session.get(Namespace, schedule.namespace_id)
        assert namespace is not None and schedule.cursor_at is not None
        ctx = FiringContext.load(session, namespace, [schedule])
        w, context = Writes(), ctx.context(schedule)
        spec, found = _scan(schedule, now, {})
        skips = _taken_skips(schedule, spec, found, now, grace)
        log.warning("schedule %s: run id already taken; occurrence skipped", schedule.schedule_id)
        rows = []
        for skip in skips:
            record_skip(w, schedule, now, skip, context)
            schedule.cursor_at = max(schedule.cursor_at, skip.last)
            rows.append(_row(ctx, schedule, "skipped", skip.first, None))
        schedule.pending_occurrence = schedule.pending_until = None
        reschedule(schedule, spec, found.upcoming)
        w.flush(session)
        schedule_rows.save(session.connection(), claimed)
        session.commit()
        return _with_next_fire(rows, schedule)


def _taken_skips(
    schedule: Schedule, spec: Spec, found: DueScan, now: datetime, grace: timedelta
) -> list[Skip]:
    """What the clashing firing covered, as the tick had decided it: the occurrences the
    missed policy skipped keep their own reason (`missed`, `capacity`); only the one it tried
    to start is skipped as `run_id_taken`."""
    choice = _choose(schedule, spec, hold(found, fire_at(schedule)), now, grace)
    taken = choice.skips
    if choice.candidate is not None:
        # (None only if the schedule changed since the clash: then nothing needs the id.)
        instant = choice.candidate.instant
        taken = [*taken, Skip(instant, instant, 1, "run_id_taken")]
    return sorted(taken, key=lambda skip: skip.first)


def _fire_schedules(
    session: Session,
    now: datetime,
    grace: timedelta,
    schedules: list[ScheduleRow],
    budget_deadline: float = float("inf"),
) -> tuple[list[dict[str, Any]], list[ScheduleRow]]:
    """Fire `schedules` (claimed in `session`) and write them, without committing; returns
    the rows and the schedules actually fired."""
    page = _Page(ExitStack(), session, now, schedules[0].namespace_id, None, schedules)
    _decide(page, grace, budget_deadline)
    _flush(page)
    return page.rows, page.fired


def _decide(
    page: _Page,
    grace: timedelta,
    budget_deadline: float = float("inf"),
    settle: Callable[[], None] | None = None,
) -> None:
    """Decide the page's firings in order until the budget runs out (checked after every
    schedule, so one page never overruns it by more than one schedule's bounded cost)."""
    session, now = page.session, page.now
    namespace = session.get(Namespace, page.claimed[0].namespace_id)
    assert namespace is not None
    plain = cast(list[Schedule], page.claimed)
    ctx = FiringContext.load(session, namespace, plain)
    ctx.settle = settle
    page.starter = starter = BulkStarter(now)
    scans: dict[tuple[Any, ...], tuple[Spec, DueScan]] = {}
    done = 0
    for schedule in plain:
        page.rows.extend(fire_one(ctx, page.writes, starter, schedule, now, grace, scans))
        done += 1
        if time.monotonic() >= budget_deadline:
            break
    page.fired = page.claimed[:done]


def _prepare(page: _Page) -> None:
    """Build the page's statements now, on the deciding thread: the writer thread then only
    sends them, so building page N+1's rows overlaps the database writing page N's."""
    assert page.starter is not None
    dialect = page.session.get_bind().dialect
    runs = page.starter.prepare(page.session)
    # The runs first, on their own: their events' row-security check must see them. The
    # rest (events, deadlines, ledger, audit, the schedules' new state) in one statement.
    rest = [
        *runs[1:],
        *page.writes.prepare(dialect),
        *schedule_rows.save_statements(dialect, page.fired),
    ]
    page.statements = [*runs[:1], *([combine(rest)] if rest else [])]


def _flush(page: _Page) -> None:
    """Send the page's writes (runs, ledger, audit, the schedules' new state)."""
    if page.statements is not None:
        # Changes made through the ORM while deciding (runs another policy ended) first.
        page.session.flush()
        execute(page.session.connection(), page.statements)
        return
    assert page.starter is not None
    page.starter.flush(page.session)
    page.writes.flush(page.session)
    schedule_rows.save(page.session.connection(), page.fired)


def fire_one(
    ctx: FiringContext,
    w: Writes,
    starter: BulkStarter,
    schedule: Schedule,
    now: datetime,
    grace: timedelta,
    scans: dict[tuple[Any, ...], tuple[Spec, DueScan]],
) -> list[dict[str, Any]]:
    """Decide and record one due schedule's firing; returns its tick rows."""
    context = ctx.context(schedule)
    reason = ctx.blocked_reason(schedule)
    if reason is not None:
        block(w, schedule, now, reason, context)
        return [_row(ctx, schedule, "blocked", None, None)]
    target = ctx.target(schedule)
    assert target is not None and schedule.cursor_at is not None
    try:
        spec, found = _scan(schedule, now, scans)
    except CalendarError:
        # A spec stored before today's limits (e.g. more than 32 expressions) no longer loads:
        # block this schedule (an authorized save fixes it) instead of failing the whole page.
        block(w, schedule, now, "spec_invalid", context)
        return [_row(ctx, schedule, "blocked", None, None)]
    scan = hold(found, fire_at(schedule))
    choice = _choose(schedule, spec, scan, now, grace)
    rows = []
    for skip in choice.skips:
        record_skip(w, schedule, now, skip, context)
        rows.append(_row(ctx, schedule, "skipped", skip.first, None))
    if not choice.retry:
        schedule.pending_occurrence = schedule.pending_until = None
    if choice.cursor is not None and choice.cursor > schedule.cursor_at:
        schedule.cursor_at = choice.cursor
    candidate = choice.candidate
    if candidate is not None:
        firing = Firing(
            candidate.instant, candidate.due, "scheduled", schedule.overlap_policy, "triggered"
        )
        # Not pending while it is decided: when a retried occurrence is the last run `max_runs`
        # allows, the deletion that follows must not also skip it for capacity.
        retried = schedule.pending_occurrence, schedule.pending_until
        schedule.pending_occurrence = schedule.pending_until = None
        result = act(ctx, w, starter, schedule, now, target, firing, context)
        if result.outcome == "refused":
            # A retry keeps its deadline; a first refusal starts one.
            schedule.pending_occurrence, schedule.pending_until = (
                retried
                if choice.retry
                else (candidate.instant, retry_until(schedule.missed_policy, candidate, now, grace))
            )
        rows.append(_row(ctx, schedule, result.outcome, candidate.due, result.run_id))
    if schedule.status == "active":
        reschedule(schedule, spec, scan.upcoming)
        # A calendar that ran out with occurrences still buffered stays active until they
        # have drained (they were accepted); the drain then blocks it.
        if nothing_left(schedule):
            block(w, schedule, now, "calendar_exhausted", context)
            rows.append(_row(ctx, schedule, "blocked", None, None))
    return _with_next_fire(rows, schedule)


def _with_next_fire(rows: list[dict[str, Any]], schedule: Schedule) -> list[dict[str, Any]]:
    """`rows` of one schedule, each with where the schedule now stands (`next_fire_at`)."""
    next_fire_at = _text(schedule.next_fire_at)
    for row in rows:
        row["next_fire_at"] = next_fire_at
    return rows


def _choose(
    schedule: Schedule, spec: Spec, scan: DueScan, now: datetime, grace: timedelta
) -> Choice:
    """The missed policy's choice for `schedule` over its due occurrences (`scan`), with the
    occurrence it holds for capacity, if any."""
    assert schedule.cursor_at is not None
    pending = None
    if schedule.pending_occurrence is not None:
        pending = Occurrence(
            schedule.pending_occurrence,
            due_time(spec, schedule.uid, schedule.jitter_seconds, schedule.pending_occurrence),
        )
    return choose(
        scan,
        schedule.missed_policy,
        schedule.cursor_at,
        pending,
        schedule.pending_until,
        now,
        grace,
    )


def _scan(
    schedule: Schedule, now: datetime, scans: dict[tuple[Any, ...], tuple[Spec, DueScan]]
) -> tuple[Spec, DueScan]:
    """The schedule's due occurrences; schedules of one page often share calendar and cursor
    (a herd on `0 * * * *`), and without jitter they share the answer too."""
    assert schedule.cursor_at is not None
    if schedule.jitter_seconds:
        spec = spec_of(schedule)
        return spec, scan_due(spec, schedule.uid, schedule.jitter_seconds, schedule.cursor_at, now)
    # Rows claimed together share one dict per distinct spec text (rows.load), so the
    # dict's identity stands for its text; every schedule keeps its dict alive for the page.
    key = (id(schedule.spec), schedule.cursor_at)
    if key not in scans:
        spec = spec_of(schedule)
        scans[key] = spec, scan_due(spec, schedule.uid, 0, schedule.cursor_at, now)
    return scans[key]


def _row(
    ctx: FiringContext,
    schedule: Schedule,
    outcome: str,
    occurrence: datetime | None,
    run_id: str | None,
) -> dict[str, Any]:
    return {
        "schedule_id": schedule.schedule_id,
        "namespace": ctx.namespace.name,
        "outcome": outcome,
        "occurrence_time": _text(occurrence),
        "run_id": run_id,
        "next_fire_at": None,
    }


# Cached: a tick's rows repeat the same few instants, and share one string for each.
_text = lru_cache(maxsize=4096)(format_utc_or_none)
