"""Tick phases for schedules: drain buffers and fire due schedules (SPEC §5.4)."""

from __future__ import annotations

from datetime import timedelta

from app.schedules import draining, ticking
from app.ticker.tick import TickContext


def drain_buffers(ctx: TickContext) -> None:
    """Start the oldest buffered occurrence of schedules with no active run."""
    rows = draining.drain_buffers(ctx.db, ctx.now, budget_deadline=ctx.deadline_monotonic)
    ctx.result.rows.extend(rows)


def fire_due_schedules(ctx: TickContext) -> None:
    """Claim due schedules in pages and fire them."""
    grace = timedelta(seconds=float(ctx.config["MISFIRE_GRACE_SECONDS"]))
    rows = ticking.fire_due(ctx.db, ctx.now, grace, budget_deadline=ctx.deadline_monotonic)
    ctx.result.rows.extend(rows)
