"""One tick: every phase in order (buffers, deadlines, schedules, leases), then a liveness beat
that `/health` reads (app/ticker/health.py)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from flask import Flask
from sqlalchemy.exc import DBAPIError

from app.context import clock as app_clock
from app.context import database, ticker_database
from app.db import Database, TickerBeat
from app.db.base import upsert_insert
from app.db.clock import wall_now
from app.db.rls import Scope
from app.db.session import begin_write
from app.ticker import rotation, runs, schedules
from app.ticker.types import Phase, TickContext, TickResult


def ticker_id() -> str:
    """This process's name in `ticker_beats`: read at each beat, since a process that loaded
    the app may fork the ones that tick (gunicorn --preload)."""
    return f"{socket.gethostname()}:{os.getpid()}"


# The tick's phases in order: buffers drain before new firings can fill them again.
PHASES: list[Phase] = [
    schedules.drain_buffers,
    runs.process_deadlines,
    schedules.fire_due_schedules,
    runs.recover_leases,
]
# The clock read and the beat: no namespace, the phases' limits (a lock held on the clock or
# on this ticker's beat row costs a second, named, not a stalled ticker).
LIMITED = Scope().limited(**rotation.PHASE_LIMITS)
# Run after the phases on request (`work`): every runnable step until none is left.
WORKERS: list[Phase] = [runs.work_until_idle]


def run_tick(app: Flask, *, work: bool = False) -> TickResult:
    """Run one tick at the clock's current time and record the beat.

    On PostgreSQL the phases run namespace by namespace in bound transactions (rotation.py);
    on SQLite once over all, each phase with a budget of its own. Either way a failing phase
    is logged and the others still run. The beat is recorded only when the tick reached its
    work: not when discovering due namespaces failed, nor when every phase failed.
    """
    db = ticker_database(app)
    with db.session(LIMITED) as session:
        now = app_clock(app).now(session)
    started = time.monotonic()
    budget = float(app.config["TICK_BUDGET_SECONDS"])
    ctx = TickContext(db, now, app.config, TickResult(now), started + budget)
    if db.is_sqlite:
        succeeded = sum(rotation.run_guarded(_own_budget(ctx, budget), p, "") for p in PHASES)
        reached = rotation.reached(len(PHASES), succeeded)
    else:
        max_pages = app.config.get("TICK_MAX_NAMESPACE_PAGES")
        reached = rotation.run_bound(ctx, PHASES, int(max_pages) if max_pages else None)
    if work:
        wctx = replace(ctx, db=database(app).bound(Scope.all()))
        for worker in WORKERS:
            try:
                worker(wctx)
            except DBAPIError as exc:
                # The steps worked so far are committed, and so are the rows fired above: the
                # tick's result keeps them and names the failure (not a bare error, rows lost).
                cause = _cause(exc)
                rotation.log_failed(f"tick work failed: {cause}", exc)
                ctx.result.failures.append({"phase": "work", "where": "", "cause": cause})
    # A tick that could not reach its work (discovery refused, every phase failed) is no sign
    # of life: without its beat `/health` turns degraded once the last good one grows stale.
    if reached:
        try:
            _record_beat(db, now, int((time.monotonic() - started) * 1000), app.config)
        except DBAPIError as exc:
            # The tick's work is committed; a beat that cannot be written (its row locked
            # elsewhere past the lock timeout, the database gone) is named, not waited on.
            cause = _cause(exc)
            rotation.log_failed(f"tick beat failed: {cause}", exc)
            ctx.result.failures.append({"phase": "beat", "where": "", "cause": cause})
    return ctx.result


def _own_budget(ctx: TickContext, budget: float) -> TickContext:
    """`ctx` with a budget that starts now: each phase has its own, as on PostgreSQL, so a
    backlog in one (thousands of expired timeouts) never starves the firing after it until
    its occurrences are missed. The result is shared: every phase adds to the tick's."""
    return replace(ctx, deadline_monotonic=time.monotonic() + budget)


def _cause(exc: DBAPIError) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


def _record_beat(db: Database, now: datetime, duration_ms: int, config: Mapping[str, Any]) -> None:
    """Upsert this process's beat: ticks of one process may end at once (several `/admin/tick`
    requests), and a read-then-insert let two of them insert its first row."""
    with db.session(LIMITED) as session:
        begin_write(session)
        # Real time on the clock `/health` reads beats with: the database's on PostgreSQL.
        wall = wall_now(session, config)
        values = {"last_tick_at": wall, "last_tick_clock": now, "duration_ms": duration_ms}
        insert = upsert_insert(session.get_bind().dialect.name)
        statement = insert(TickerBeat).values(ticker_id=ticker_id(), **values)
        session.execute(statement.on_conflict_do_update(index_elements=["ticker_id"], set_=values))
        session.commit()
