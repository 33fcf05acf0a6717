"""Tick phases for schedules: drain buffers and fire due schedules."""

from __future__ import annotations

from datetime import timedelta

from app.db.clock import clock_from
from app.schedules.tick import buffers, due
from app.ticker.types import TickContext


def drain_buffers(ctx: TickContext) -> None:
    """Start the oldest buffered occurrence of schedules with no active run."""
    rows = buffers.drain(ctx.db, ctx.now, budget_deadline=ctx.deadline_monotonic)
    ctx.result.rows.extend(rows)


def fire_due_schedules(ctx: TickContext) -> None:
    """Claim due schedules in pages and fire them; each page reads the clock again before it
    commits, so a start whose grace ran out while the page waited is not made stale."""
    grace = timedelta(seconds=float(ctx.config["MISFIRE_GRACE_SECONDS"]))
    clock = clock_from(ctx.config)
    rows = due.fire_due(
        ctx.db,
        ctx.now,
        grace,
        budget_deadline=ctx.deadline_monotonic,
        recheck=clock.current,
        writers=int(ctx.config.get("TICK_WRITERS", due.WRITERS)),
    )
    ctx.result.rows.extend(rows)
