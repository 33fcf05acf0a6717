"""Firing due schedules (§5.4): claim pages, decide per schedule, write each page at once.

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

from sqlalchemy import distinct, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import Spec, format_utc, parse_instant
from app.db import Database, Namespace, Schedule
from app.db.session import begin_write
from app.schedules import rows as rows_module
from app.schedules.acting import act
from app.schedules.firing import DueScan, Occurrence, choose, due_of, retry_until, scan_due
from app.schedules.ledger import Writes, block, record_skip, reschedule, spec_of
from app.schedules.page import PageContext
from app.schedules.rows import ScheduleRow
from app.schedules.starts import BulkStarter

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
        namespaces = sorted(
            session.scalars(
                select(distinct(Schedule.namespace_id)).where(
                    Schedule.status == "active", Schedule.next_fire_at <= now
                )
            )
        )
    if not namespaces:
        return rows
    turn = next(_turns) % len(namespaces)
    namespaces = namespaces[turn:] + namespaces[:turn]
    keys: dict[int, tuple[datetime, int] | None] = dict.fromkeys(namespaces)
    while namespaces and time.monotonic() < budget_deadline:
        for namespace_id in list(namespaces):
            claimed, keys[namespace_id] = _fire_page(
                db, now, grace, namespace_id, keys[namespace_id], rows, recheck
            )
            if on_page is not None:
                on_page(claimed)
            if claimed < PAGE_SIZE:
                namespaces.remove(namespace_id)
            if time.monotonic() >= budget_deadline:
                break
    return rows


def _claim(
    session: Session,
    now: datetime,
    limit: int,
    *,
    namespace_id: int | None = None,
    key: tuple[datetime, int] | None = None,
    pk: int | None = None,
) -> list[ScheduleRow]:
    table = rows_module.TABLE
    query = select(*rows_module.selectable()).where(
        table.c.status == "active", table.c.next_fire_at <= now
    )
    if namespace_id is not None:
        query = query.where(table.c.namespace_id == namespace_id)
    if pk is not None:
        query = query.where(table.c.id == pk)
    if key is not None:
        query = query.where(tuple_(table.c.next_fire_at, table.c.id) > key)
    query = query.order_by(table.c.next_fire_at, table.c.id).limit(limit)
    return rows_module.load(session.connection(), query.with_for_update(skip_locked=True))


def _fire_page(
    db: Database,
    now: datetime,
    grace: timedelta,
    namespace_id: int,
    key: tuple[datetime, int] | None,
    rows: list[dict[str, Any]],
    recheck: Callable[[Session], datetime] | None = None,
) -> tuple[int, tuple[datetime, int] | None]:
    with db.session() as session:
        begin_write(session)
        schedules = _claim(session, now, PAGE_SIZE, namespace_id=namespace_id, key=key)
        if not schedules:
            return 0, key
        last = schedules[-1]
        assert last.next_fire_at is not None
        next_key = (last.next_fire_at, last.id)
        try:
            page_rows = _fire_schedules(session, now, grace, schedules)
            later = _stale_at(session, now, page_rows, grace, recheck)
            if later is not None:
                # The page waited (on locks) past a start's grace: decide again at that time,
                # so the occurrence is recorded as missed instead of started stale.
                session.rollback()
                return _fire_page(db, later, grace, namespace_id, key, rows, recheck)
            session.commit()
        except IntegrityError:
            # Another writer already holds one of these run ids: redo the page one by one.
            session.rollback()
            page_rows = _fire_each(db, now, grace, [s.id for s in schedules])
    rows.extend(page_rows)
    return len(schedules), next_key


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
            claimed = _claim(session, now, 1, pk=pk)
            if not claimed:
                continue
            try:
                fired = _fire_schedules(session, now, grace, claimed)
                session.commit()
                rows.extend(fired)
            except IntegrityError:
                session.rollback()
                log.error("schedule %s: run id already taken; firing rolled back", pk)
    return rows


def _fire_schedules(
    session: Session, now: datetime, grace: timedelta, schedules: list[ScheduleRow]
) -> list[dict[str, Any]]:
    namespace = session.get(Namespace, schedules[0].namespace_id)
    assert namespace is not None
    plain = cast(list[Schedule], schedules)
    ctx = PageContext.load(session, namespace, plain)
    w, starter = Writes(), BulkStarter(now)
    rows: list[dict[str, Any]] = []
    scans: dict[tuple[Any, ...], tuple[Spec, DueScan]] = {}
    for schedule in plain:
        rows.extend(fire_one(ctx, w, starter, schedule, now, grace, scans))
    starter.flush(session)
    w.flush(session)
    rows_module.save(session.connection(), schedules)
    return rows


def fire_one(
    ctx: PageContext,
    w: Writes,
    starter: BulkStarter,
    schedule: Schedule,
    now: datetime,
    grace: timedelta,
    scans: dict[tuple[Any, ...], tuple[Spec, DueScan]],
) -> list[dict[str, Any]]:
    """Decide and record one due schedule's firing; returns its tick rows."""
    context = ctx.context(schedule)
    reason = _blocked_reason(ctx, schedule)
    if reason is not None:
        block(w, schedule, now, reason, context)
        return [_row(ctx, schedule, "blocked", None, None)]
    target = ctx.target(schedule)
    assert target is not None and schedule.cursor_at is not None
    spec, scan = _scan(schedule, now, scans)
    pending = None
    if schedule.pending_occurrence is not None:
        pending = Occurrence(
            schedule.pending_occurrence,
            due_of(spec, schedule.uid, schedule.jitter_seconds, schedule.pending_occurrence),
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
        result = act(
            ctx,
            w,
            starter,
            schedule,
            now,
            target,
            instant=candidate.instant,
            occurrence_time=candidate.due,
            origin="scheduled",
            policy=schedule.overlap_policy,
            outcome="triggered",
            context=context,
        )
        if result.outcome == "refused" and not choice.retry:
            schedule.pending_occurrence = candidate.instant
            schedule.pending_until = retry_until(schedule.missed_policy, candidate, now, grace)
        elif result.outcome != "refused":
            schedule.pending_occurrence = schedule.pending_until = None
        rows.append(_row(ctx, schedule, result.outcome, candidate.due, result.run_id))
    if schedule.status == "active":
        reschedule(schedule, spec, scan.upcoming)
        if schedule.next_fire_at is None:
            block(w, schedule, now, "calendar_exhausted", context)
            rows.append(_row(ctx, schedule, "blocked", None, None))
    for row in rows:
        row["next_fire_at"] = _text(schedule.next_fire_at)
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


def _blocked_reason(ctx: PageContext, schedule: Schedule) -> str | None:
    if not ctx.authorized(schedule):
        return "principal_unauthorized"
    if ctx.target(schedule) is None:
        return "activation_not_ready"
    return None


def _row(
    ctx: PageContext,
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


@lru_cache(maxsize=4096)
def _text(value: datetime | None) -> str | None:
    # Cached: a tick's rows repeat the same few instants, and share one string for each.
    return None if value is None else format_utc(value)
