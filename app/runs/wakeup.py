"""Idle workers woken when work becomes claimable, instead of sleeping until their next poll.

On PostgreSQL, transactions that make work claimable send `NOTIFY almanac_work` as they
commit (app/db/announce.py). Each worker pool listens on a connection of its own and wakes its
idle threads. The notice carries nothing (row security still decides what a worker may claim),
and a lost one costs only latency: idle threads still poll every `poll_seconds`. SQLite has no
notifications: its workers poll (docs/runs.md, "Waking idle workers").
"""

from __future__ import annotations

import logging
import threading

from app.db import Database
from app.db.announce import CHANNEL

log = logging.getLogger(__name__)

# How long the listener waits before connecting again after losing its connection.
RECONNECT_SECONDS = 1.0


class Wakeup:
    """A doorbell for a pool's idle threads: `ring` wakes every thread waiting in `wait`."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._rings = 0

    def seen(self) -> int:
        """The rings so far: pass it to `wait` so a ring in between is not slept through."""
        with self._condition:
            return self._rings

    def ring(self) -> None:
        with self._condition:
            self._rings += 1
            self._condition.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until a ring after `seen`, or `timeout` seconds; whether it rang."""
        with self._condition:
            return self._condition.wait_for(lambda: self._rings != seen, timeout)


class Listener:
    """A thread that rings `wakeup` on each `NOTIFY almanac_work` (PostgreSQL only).

    It holds one connection of its own, outside the pool. When the connection fails (the
    server restarts, say) it rings once, so threads look at once, and connects again every
    `RECONNECT_SECONDS` until it can; meanwhile the threads poll as before.
    """

    def __init__(self, db: Database, wakeup: Wakeup, stopping: threading.Event) -> None:
        self.db, self.wakeup, self.stopping = db, wakeup, stopping
        # Whether the last connection failed: its warning was logged, the next LISTEN says so.
        self.failing = False
        self.thread = threading.Thread(target=self._loop, name="almanac-wakeup", daemon=True)

    def start(self) -> Listener:
        if not self.db.is_sqlite:
            self.thread.start()
        return self

    def join(self, timeout: float | None) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001 - a lost connection must not stop the pool
                if not self.failing:
                    log.warning("worker wake-ups paused, polling meanwhile: %s", type(exc).__name__)
                self.failing = True
            self.wakeup.ring()
            self.stopping.wait(RECONNECT_SECONDS)

    def _listen(self) -> None:
        dialect = self.db.engine.dialect
        args, kwargs = dialect.create_connect_args(self.db.engine.url)
        with dialect.loaded_dbapi.connect(*args, **kwargs, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            if self.failing:
                log.warning("worker wake-ups resumed")
                self.failing = False
            # Work committed before LISTEN took effect was announced to nobody: look now.
            self.wakeup.ring()
            while not self.stopping.is_set():
                # A short bounded wait, so a stopping pool is not held up.
                for _ in conn.notifies(timeout=0.25):
                    self.wakeup.ring()
