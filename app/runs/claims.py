"""What a worker holds while it executes a step: its settings, its claims and their outcomes."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from app.db.clock import ManualClock, SystemClock
from app.runs.actions import ActionContext

ANY_QUEUE = "*"
DEFAULT_LEASE_SECONDS = 60.0
DEFAULT_BATCH = 100
DEFAULT_BATCH_SECONDS = 1.0
Clock = SystemClock | ManualClock


@dataclass(frozen=True)
class WorkerSettings:
    """Who is claiming (`name`), for which queue, and for how long a lease lasts."""

    name: str
    queue: str | None = None  # None: the default queue; ANY_QUEUE: every queue
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    # Most steps claimed per transaction; their actions run one after the other.
    batch: int = DEFAULT_BATCH
    # How long a batch may keep its claimed steps waiting: once it has run this long, no further
    # action of it starts and the unstarted steps are handed back (docs/runs.md).
    batch_seconds: float = DEFAULT_BATCH_SECONDS

    @property
    def hand_back_after(self) -> float:
        """Seconds after which unstarted claims are handed back: `batch_seconds`, and never more
        than a heartbeat interval (a third of the lease)."""
        return min(self.batch_seconds, self.lease_seconds / 3)


def worker_name(suffix: str = "") -> str:
    base = f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"
    return f"{base}:{suffix}" if suffix else base


@dataclass(frozen=True)
class Claim:
    """A leased action step, with everything the action needs so it runs without the database."""

    run_pk: int
    owner: str
    action: str
    context: ActionContext
    max_attempts: int
    backoff_seconds: float
    branch_pk: int | None = None  # None: a step of the run's root sequence
    # Why the action cannot run at all (its input's secret cannot be decrypted): the attempt
    # fails with this error instead of calling the action.
    refused: dict[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None


@dataclass
class ClaimSize:
    """How many steps a worker thread claims next: adapted to how long its batches take.

    It starts at 1 and doubles (up to `settings.batch`) after each batch whose actions finished
    within half of `hand_back_after`; a batch that ran longer, or handed steps back, brings it
    back to 1. Fast actions are thus claimed many at a time, and slow ones one at a time, so a
    claimed step seldom waits behind another's long action.
    """

    current: int = 1

    def next(self, settings: WorkerSettings) -> int:
        return max(1, min(self.current, settings.batch))

    def learn(self, settings: WorkerSettings, took: float, handed_back: bool) -> None:
        if handed_back or took > settings.hand_back_after:
            self.current = 1
        elif took <= settings.hand_back_after / 2:
            self.current = min(self.current * 2, max(settings.batch, 1))
