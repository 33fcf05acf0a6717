"""Namespace-bound, bounded tick phases (docs/postgres.md).

On PostgreSQL the ticker finds namespaces with due work only through
`almanac_due_namespaces(now, 16)`, which pages from a durable rotating cursor, and runs every
phase for one namespace at a time in transactions bound to it. Each phase of each namespace has
its own budget (`PHASE_BUDGET_SECONDS`), a statement timeout
and a lock timeout, so one stuck namespace or phase costs a second, not the tick. A phase that
fails is rolled back (its occurrences stay due), logged with its cause, and the rest go on.
SQLite has one writer and no row security: its phases run once over every namespace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from app.db import Database
from app.db.rls import Scope
from app.db.session import is_outage
from app.ticker.types import Phase, TickContext

log = logging.getLogger(__name__)

PAGE = 16
PHASE_BUDGET_SECONDS = 5.0
PHASE_LIMITS = {"statement_timeout": "4s", "lock_timeout": "1s"}
INSUFFICIENT_PRIVILEGE = "42501"

# Which phase each flag of the discovery function stands for; a phase not named always runs.
PHASE_FLAGS = {
    "drain_buffers": "buffers",
    "process_deadlines": "deadlines_due",
    "fire_due_schedules": "schedules_due",
    "recover_leases": "leases_expired",
}


@dataclass(frozen=True)
class DueNamespace:
    """A namespace with due work, and which kinds of work are due there."""

    id: int
    due: frozenset[str]

    def needs(self, phase: Phase) -> bool:
        flag = PHASE_FLAGS.get(phase.__name__)
        return flag is None or flag in self.due


def discovery_refused(db: Database) -> str | None:
    """Why this database's login may not discover due work (None when it may): a ticker that
    logs in as anything but the scheduler login fires nothing on PostgreSQL."""
    if db.is_sqlite:
        return None
    with db.session() as session:
        allowed = session.scalar(
            text(
                "SELECT bool_or(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_proc p"
                " WHERE p.proname = 'almanac_due_namespaces'"
            )
        )
        login = session.scalar(text("SELECT current_user"))
    if allowed:
        return None
    return (
        f"the ticker's login {login} may not call almanac_due_namespaces, so it will fire "
        "nothing: run it as almanac_scheduler (ALMANAC_SCHEDULER_DATABASE_URL, docs/postgres.md)"
    )


def due_namespaces(db: Database, now: Any, page: int = PAGE) -> list[DueNamespace]:
    """The next (at most 16) namespaces with due work; moves the shared cursor past them.

    Bounded like a phase: the function locks the cursor row every ticker shares and reads the
    due indexes, so a lock held elsewhere (or a ticker stuck inside it) fails this tick's
    discovery within the lock timeout, named, instead of stalling every ticker in silence.
    """
    with db.session(Scope().limited(**PHASE_LIMITS)) as session:
        rows = session.execute(
            text("SELECT * FROM almanac_due_namespaces(:now, :page)"), {"now": now, "page": page}
        ).mappings()
        found = [
            DueNamespace(row["ns_id"], frozenset(k for k, v in row.items() if v is True))
            for row in rows
        ]
        session.commit()
    return found


def rotation(
    db: Database, now: Any, max_pages: int | None, deadline: float
) -> Iterator[list[DueNamespace]]:
    """Pages of due namespaces until one brings nothing new (the rotation came round), the
    tick's budget is spent, or `max_pages` were taken. A page taken is always served whole,
    so the cursor never passes a namespace the tick did not visit."""
    seen: set[int] = set()
    pages = 0
    while (max_pages is None or pages < max_pages) and time.monotonic() < deadline:
        fresh = [ns for ns in due_namespaces(db, now) if ns.id not in seen]
        pages += 1
        if not fresh:
            return
        seen.update(ns.id for ns in fresh)
        yield fresh


def reached(ran: int, succeeded: int) -> bool:
    """Whether a tick that ran `ran` phases, `succeeded` of them without failing, reached its
    work: it did unless every phase it ran failed."""
    return ran == 0 or succeeded > 0


def log_failed(what: str, exc: BaseException) -> None:
    """Log a failed phase or discovery in one line with its cause: a warning when the database
    was unavailable or a lock was held too long (an outage, a failover: the next tick retries),
    an error when it refused the statement, an error with the traceback for anything else (a
    bug), as `log_failure` decides for workers."""
    if is_outage(exc):
        log.warning(what)
    elif isinstance(exc, ProgrammingError):
        log.error(what)
        log.debug(what, exc_info=exc)
    else:
        log.error(what, exc_info=exc)


def run_guarded(ctx: TickContext, phase: Phase, where: str) -> bool:
    """Run `phase`; on failure (rolled back already) log the cause and return False."""
    try:
        phase(ctx)
    except Exception as exc:  # noqa: BLE001 - one failed phase must not stop the others
        cause = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        place = f" {where}" if where else ""
        log_failed(f"tick phase {phase.__name__} failed{place}: {cause}", exc)
        ctx.result.failures.append({"phase": phase.__name__, "where": where, "cause": cause})
        return False
    return True


def run_bound(ctx: TickContext, phases: Sequence[Phase], max_pages: int | None) -> bool:
    """Every phase for each due namespace in turn, each in transactions bound to it; whether
    the tick reached its work (see `run_tick`).

    If discovery itself fails (the database is away, or this login may not call the function:
    run the ticker as `almanac_scheduler`), the tick records why and ends; the next one retries.
    """
    db: Database = ctx.db
    pages = rotation(db, ctx.now, max_pages, ctx.deadline_monotonic)
    ran = succeeded = 0
    while True:
        try:
            namespaces = next(pages)
        except StopIteration:
            return reached(ran, succeeded)
        except DBAPIError as exc:
            cause = f"{type(exc.orig).__name__}: {str(exc.orig).splitlines()[0]}"
            if getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
                # Said where it is read too (a tick's failures, `POST /admin/tick`).
                cause += " (run the ticker as almanac_scheduler: ALMANAC_SCHEDULER_DATABASE_URL)"
            log_failed(f"tick discovery of due namespaces failed: {cause}", exc)
            ctx.result.failures.append({"phase": "discovery", "where": "", "cause": cause})
            return False
        for namespace in namespaces:
            bound = db.bound(Scope.of([namespace.id]).limited(**PHASE_LIMITS))
            for phase in filter(namespace.needs, phases):
                deadline = time.monotonic() + PHASE_BUDGET_SECONDS
                nctx = replace(ctx, db=bound, deadline_monotonic=deadline)
                ran += 1
                succeeded += run_guarded(nctx, phase, f"in namespace {namespace.id}")
            ctx.result.namespaces += 1
