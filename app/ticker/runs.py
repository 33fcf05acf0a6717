"""Tick phases for runs: due deadlines (SPEC §6.4), expired leases, and `work` on demand."""

from __future__ import annotations

from app.ticker.tick import TickContext


def process_deadlines(ctx: TickContext) -> None:
    """Apply every deadline due at `ctx.now` in §6.4 order (runs issue)."""


def recover_leases(ctx: TickContext) -> None:
    """Make steps whose worker lease expired claimable again (runs issue)."""


def work_until_idle(ctx: TickContext) -> None:
    """Run every runnable step until none is left (runs issue)."""
