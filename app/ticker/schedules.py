"""Tick phases for schedules: drain buffers and fire due schedules."""

from __future__ import annotations

from datetime import timedelta

from app.schedules.tick import buffers, due
from app.ticker.types import TickContext


def drain_buffers(ctx: TickContext) -> None:
    """Start the oldest buffered occurrence of schedules with no active run."""
    rows = buffers.drain(ctx.db, ctx.now, budget_deadline=ctx.deadline_monotonic)
    ctx.result.rows.extend(rows)


def fire_due_schedules(ctx: TickContext) -> None:
    """Claim due schedules in pages and fire them."""
    grace = timedelta(seconds=float(ctx.config["MISFIRE_GRACE_SECONDS"]))
    rows = due.fire_due(ctx.db, ctx.now, grace, budget_deadline=ctx.deadline_monotonic)
    ctx.result.rows.extend(rows)
