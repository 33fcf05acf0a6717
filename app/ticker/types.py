"""What the tick and its phases share: the context every phase receives and the tick's result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.calendar import format_utc
from app.db import Database


@dataclass
class TickResult:
    """What one tick did: schedule rows, deadlines applied and steps run."""

    now: datetime
    rows: list[dict[str, Any]] = field(default_factory=list)
    deadlines: int = 0
    steps: int = 0
    # Namespaces visited (PostgreSQL) and phases that failed, with their cause.
    namespaces: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": format_utc(self.now),
            "rows": self.rows,
            "deadlines": self.deadlines,
            "steps": self.steps,
            "failures": self.failures,
        }


@dataclass
class TickContext:
    """What every phase receives: the database, the tick's `now` and the settings."""

    db: Database
    now: datetime
    config: Mapping[str, Any]
    result: TickResult
    deadline_monotonic: float


Phase = Callable[[TickContext], None]
