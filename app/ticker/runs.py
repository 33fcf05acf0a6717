"""Tick phases for runs: due deadlines, expired leases, and `work` on demand."""

from __future__ import annotations

import time

from app.db.clock import clock_from
from app.runs import deadlines, engine, leases
from app.runs.locking import begin_write
from app.ticker.types import TickContext

LEASE_PAGE = 100
# `work` drains everything synchronously: claim in batches for throughput.
WORK_BATCH = 25


def _budget_left(ctx: TickContext) -> bool:
    return time.monotonic() < ctx.deadline_monotonic


def process_deadlines(ctx: TickContext) -> None:
    """Apply every deadline due at `ctx.now` in order, page by page within the budget."""
    result = deadlines.scan(ctx.db, ctx.now, budget_left=lambda: _budget_left(ctx))
    ctx.result.deadlines += result.applied


def recover_leases(ctx: TickContext) -> None:
    """Make steps whose worker lease expired claimable again (the step will run again)."""
    while _budget_left(ctx):
        with ctx.db.session() as session:
            begin_write(session)
            released = leases.recover_expired_leases(session, ctx.now, LEASE_PAGE)
            session.commit()
        if released < LEASE_PAGE:
            return


def work_until_idle(ctx: TickContext) -> None:
    """Run every runnable step, on every queue, until none is left (`work: true`)."""
    settings = engine.WorkerSettings(
        name=engine.worker_name("tick"),
        queue=engine.ANY_QUEUE,
        batch=WORK_BATCH,
        lease_seconds=float(ctx.config.get("LEASE_SECONDS", engine.DEFAULT_LEASE_SECONDS)),
    )
    clock = clock_from(ctx.config)
    while advanced := engine.work_once(ctx.db, clock, settings):
        ctx.result.steps += advanced
