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
Clock = SystemClock | ManualClock


@dataclass(frozen=True)
class WorkerSettings:
    """Who is claiming (`name`), for which queue, and for how long a lease lasts."""

    name: str
    queue: str | None = None  # None: the default queue; ANY_QUEUE: every queue
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    # Runs claimed per transaction; their actions run one after the other (throughput vs latency).
    batch: int = 1


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


@dataclass(frozen=True)
class Outcome:
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None
