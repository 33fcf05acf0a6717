"""Tick phases for schedules: drain buffers and fire due schedules (SPEC §5.4)."""

from __future__ import annotations

from app.ticker.tick import TickContext


def drain_buffers(ctx: TickContext) -> None:
    """Start the oldest buffered occurrence of schedules with no active run (schedules issue)."""


def fire_due_schedules(ctx: TickContext) -> None:
    """Claim due schedules in pages and fire them (schedules issue)."""
