"""Firing due schedules: claim pages, decide per schedule, write each page at once.

A page is claimed with `FOR UPDATE SKIP LOCKED` on PostgreSQL (replicas take different pages)
and under `BEGIN IMMEDIATE` on SQLite. Everything one firing writes (the run and its first
events, the ledger row, the audit event, the counters and the cursor) is in its page's
transaction, so a crash leaves all of it or none. Namespaces take turns, page by page.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, cast

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import CalendarError, Spec, due_time, format_utc_or_none, parse_instant
from app.db import Database, Namespace, Schedule
from app.db.session import begin_write
from app.schedules.ledger import Writes, record_skip
from app.schedules.store import spec_of
from app.schedules.tick import rows as schedule_rows
from app.schedules.tick.act import act
from app.schedules.tick.context import FiringContext
from app.schedules.tick.policy import (
    DueScan,
    Occurrence,
    Skip,
    choose,
    retry_until,
    scan_due,
)
from app.schedules.tick.rows import ScheduleRow
from app.schedules.tick.starts import BulkStarter, Firing
from app.schedules.transitions import block, reschedule

log = logging.getLogger(__name__)

PAGE_SIZE = 500
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
) -> list[dict[str, Any]]:
    """Fire every due schedule, page by page and namespace by namespace, within the budget.

    `on_page(claimed)` is called after each page commits (the benchmark times them).
    `recheck(session)` reads the clock again right before a page commits (see `_stale_at`).
    """
    rows: list[dict[str, Any]] = []
    with db.session() as session:
        namespaces = schedule_rows.due_namespaces(session, now)
    if not namespaces:
        return rows
    turn = next(_turns) % len(namespaces)
    namespaces = namespaces[turn:] + namespaces[:turn]
    keys: dict[int, tuple[datetime, int] | None] = dict.fromkeys(namespaces)
    while namespaces and time.monotonic() < budget_deadline:
        for namespace_id in list(namespaces):
            claimed, keys[namespace_id] = _fire_page(
                db, now, grace, namespace_id, keys[namespace_id], rows, budget_deadline, recheck
            )
            if on_page is not None:
                on_page(claimed)
            if claimed < PAGE_SIZE:
                namespaces.remove(namespace_id)
            if time.monotonic() >= budget_deadline:
                break
    return rows


def _fire_page(
    db: Database,
    now: datetime,
    grace: timedelta,
    namespace_id: int,
    key: tuple[datetime, int] | None,
    rows: list[dict[str, Any]],
    budget_deadline: float = float("inf"),
    recheck: Callable[[Session], datetime] | None = None,
) -> tuple[int, tuple[datetime, int] | None]:
    with db.session() as session:
        begin_write(session)
        schedules = schedule_rows.claim(session, now, PAGE_SIZE, namespace_id=namespace_id, key=key)
        if not schedules:
            return 0, key
        keys = [(s.next_fire_at, s.id) for s in schedules]
        try:
            page_rows, schedules = _fire_schedules(session, now, grace, schedules, budget_deadline)
            later = _stale_at(session, now, page_rows, grace, recheck)
            if later is not None:
                # The page waited (on locks) past a start's grace: decide again at that time,
                # so the occurrence is recorded as missed instead of started stale.
                session.rollback()
                return _fire_page(
                    db, later, grace, namespace_id, key, rows, budget_deadline, recheck
                )
            session.commit()
        except IntegrityError:
            # Another writer already holds one of these run ids: redo the page one by one.
            session.rollback()
            page_rows = _fire_each(db, now, grace, [s.id for s in schedules])
    rows.extend(page_rows)
    last_key = keys[len(schedules) - 1]
    assert last_key[0] is not None
    return len(schedules), (last_key[0], last_key[1])


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
        spec, scan = _scan(schedule, now, {})
        skip = _taken_range(schedule, scan)
        log.warning("schedule %s: run id already taken; occurrence skipped", schedule.schedule_id)
        record_skip(w, schedule, now, skip, context)
        schedule.pending_occurrence = schedule.pending_until = None
        schedule.cursor_at = max(schedule.cursor_at, skip.last)
        reschedule(schedule, spec, scan.upcoming)
        w.flush(session)
        schedule_rows.save(session.connection(), claimed)
        session.commit()
        row = _row(ctx, schedule, "skipped", skip.first, None)
        row["next_fire_at"] = format_utc_or_none(schedule.next_fire_at)
        return [row]


def _taken_range(schedule: Schedule, scan: DueScan) -> Skip:
    """The occurrences a clashing firing covered: the pending one, or every due one."""
    if scan.first is not None and scan.last is not None:
        return Skip(scan.first.instant, scan.last.instant, scan.count, "run_id_taken")
    instant = schedule.pending_occurrence or schedule.cursor_at
    assert instant is not None
    return Skip(instant, instant, 1, "run_id_taken")


def _fire_schedules(
    session: Session,
    now: datetime,
    grace: timedelta,
    schedules: list[ScheduleRow],
    budget_deadline: float = float("inf"),
) -> tuple[list[dict[str, Any]], list[ScheduleRow]]:
    """Fire `schedules` in order until the budget runs out (checked after every schedule, so
    one page never overruns it by more than one schedule's bounded cost); returns the rows and
    the schedules actually fired."""
    namespace = session.get(Namespace, schedules[0].namespace_id)
    assert namespace is not None
    plain = cast(list[Schedule], schedules)
    ctx = FiringContext.load(session, namespace, plain)
    w, starter = Writes(), BulkStarter(now)
    rows: list[dict[str, Any]] = []
    scans: dict[tuple[Any, ...], tuple[Spec, DueScan]] = {}
    done = 0
    for schedule in plain:
        rows.extend(fire_one(ctx, w, starter, schedule, now, grace, scans))
        done += 1
        if time.monotonic() >= budget_deadline:
            break
    starter.flush(session)
    w.flush(session)
    schedule_rows.save(session.connection(), schedules[:done])
    return rows, schedules[:done]


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
        spec, scan = _scan(schedule, now, scans)
    except CalendarError:
        # A spec stored before today's limits (e.g. more than 32 expressions) no longer loads:
        # block this schedule (an authorized save fixes it) instead of failing the whole page.
        block(w, schedule, now, "spec_invalid", context)
        return [_row(ctx, schedule, "blocked", None, None)]
    pending = None
    if schedule.pending_occurrence is not None:
        pending = Occurrence(
            schedule.pending_occurrence,
            due_time(spec, schedule.uid, schedule.jitter_seconds, schedule.pending_occurrence),
        )
    choice = choose(
        scan,
        schedule.missed_policy,
        schedule.cursor_at,
        pending,
        schedule.pending_until,
        now,
        grace,
    )
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
        if schedule.next_fire_at is None:
            block(w, schedule, now, "calendar_exhausted", context)
            rows.append(_row(ctx, schedule, "blocked", None, None))
    for row in rows:
        row["next_fire_at"] = format_utc_or_none(schedule.next_fire_at)
    return rows


def _scan(
    schedule: Schedule, now: datetime, scans: dict[tuple[Any, ...], tuple[Spec, DueScan]]
) -> tuple[Spec, DueScan]:
    """The schedule's due occurrences; schedules of one page often share calendar and cursor
    (a herd on `0 * * * *`), and without jitter they share the answer too."""
    assert schedule.cursor_at is not None
    if schedule.jitter_seconds:
        spec = spec_of(schedule)
        return spec, scan_due(spec, schedule.uid, schedule.jitter_seconds, schedule.cursor_at, now)
    key = (repr(schedule.spec), schedule.cursor_at)
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
