"""A pool of worker threads, each claiming and running steps until stopped."""

from __future__ import annotations

import logging
import threading

from app.db import Database
from app.db.session import log_failure
from app.runs.claims import DEFAULT_BATCH, DEFAULT_BATCH_SECONDS, ClaimSize
from app.runs.engine import Clock, WorkerSettings, work_once, worker_name
from app.runs.leases import Heartbeat
from app.runs.wakeup import Listener, Wakeup

log = logging.getLogger(__name__)


class WorkerPool:
    """`size` threads running `work_once`; an idle thread polls every `poll_seconds`, and on
    PostgreSQL is woken as soon as a transaction makes work claimable (app/runs/wakeup.py).

    Each thread claims up to `batch` steps at a time, adapted to how long its batches take
    (`ClaimSize`), and hands back what it has not started after `batch_seconds`; the pool's one
    heartbeat keeps every claimed step's lease alive meanwhile.
    """

    def __init__(
        self,
        db: Database,
        clock: Clock,
        *,
        size: int,
        queue: str | None = None,
        lease_seconds: float = 60.0,
        poll_seconds: float = 0.5,
        batch: int = DEFAULT_BATCH,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
    ) -> None:
        self.db = db
        self.clock = clock
        self.size = size
        self.queue = queue
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.batch_seconds = batch_seconds
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        # One heartbeat for the pool keeps every executing step's lease alive.
        self.heartbeat = Heartbeat(db, clock, lease_seconds)
        self.wakeup = Wakeup()
        self.listener = Listener(db, self.wakeup, self.stopping)

    def start(self) -> WorkerPool:
        if self.size > 0:  # `scheduler run --workers 0` hosts the ticker alone
            self.listener.start()
        for index in range(self.size):
            thread = threading.Thread(
                target=self._loop, name=f"almanac-worker-{index}", daemon=True
            )
            thread.start()
            self.threads.append(thread)
        return self

    def _loop(self) -> None:
        settings = WorkerSettings(
            name=worker_name(),
            queue=self.queue,
            lease_seconds=self.lease_seconds,
            batch=self.batch,
            batch_seconds=self.batch_seconds,
        )
        size = ClaimSize()  # each thread adapts its own claims to the actions it meets
        busy = False
        while not self.stopping.is_set():
            seen = self.wakeup.seen()
            try:
                advanced = work_once(
                    self.db,
                    self.clock,
                    settings,
                    peek=not busy,
                    heartbeat=self.heartbeat,
                    size=size,
                    stopping=self.stopping.is_set,
                )
                busy = advanced > 0
            except Exception as exc:  # a database hiccup must not kill the thread; try again
                log_failure(log, "worker step failed", exc)
                busy = False
            if not busy:
                self.wakeup.wait(seen, self.poll_seconds)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Ask every thread to stop after its current step, and wait for them."""
        self.stopping.set()
        self.wakeup.ring()
        for thread in self.threads:
            thread.join(timeout)
        self.threads.clear()
        self.listener.join(timeout)
        self.heartbeat.stop()
