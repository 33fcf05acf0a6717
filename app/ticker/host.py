"""Hosts the tick loop (APScheduler 3's BackgroundScheduler) and the worker threads in a process."""

from __future__ import annotations

import atexit
import logging
import math
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler
from flask import Flask

from app.context import clock, database, ticker_database
from app.db.clock import clock_offset, process_now
from app.db.rls import Scope
from app.db.session import log_failure
from app.runs.actions import load_modules
from app.runs.claims import DEFAULT_BATCH, DEFAULT_BATCH_SECONDS
from app.runs.engine import DEFAULT_LEASE_SECONDS
from app.runs.pool import WorkerPool
from app.settings import help_only
from app.ticker import rotation
from app.ticker.health import scheduler_enabled
from app.ticker.tick import run_tick

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 2
# Ticks fall this long after each multiple of the period on the wall clock (docs/operations.md
# "When ticks happen"): a run due at 12:00:00 is fired at 12:00:00.05, not up to a period later,
# and a database clock a few milliseconds behind this machine's still reads 12:00:00.
TICK_AFTER_SECONDS = 0.05

# One ticker per process, however many apps the process builds.
_hosted: BackgroundScheduler | None = None
_pool: WorkerPool | None = None
_lock = threading.Lock()


def _tick_job(app: Flask) -> None:
    try:
        run_tick(app, work=False)
    except (
        Exception
    ) as exc:  # a failed tick must not kill the scheduler thread; the next one retries
        log_failure(log, "tick failed", exc)


def aligned_start(now: datetime, period: float) -> datetime:
    """The first tick after `now`: the next multiple of `period` seconds since the Unix epoch,
    plus `TICK_AFTER_SECONDS`. Occurrences fall on whole seconds, so ticks do too."""
    epoch = now.timestamp()
    boundary = math.floor(epoch / period) * period + TICK_AFTER_SECONDS
    if boundary <= epoch:
        boundary += period * math.ceil((epoch - boundary) / period + 1e-9)
    return datetime.fromtimestamp(boundary, UTC)


def worker_pool(app: Flask, *, queue: str | None = None, size: int | None = None) -> WorkerPool:
    """A (not yet started) pool of `WORKERS` threads for `app`, with its action modules loaded."""
    load_modules(app.config.get("ACTION_MODULES"))
    # Workers take runnable steps of every namespace (the app login, under row security).
    return WorkerPool(
        database(app).bound(Scope.all()),
        clock(app),
        queue=queue,
        size=int(size if size is not None else app.config.get("WORKERS", DEFAULT_WORKERS)),
        lease_seconds=float(app.config.get("LEASE_SECONDS", DEFAULT_LEASE_SECONDS)),
        poll_seconds=float(app.config.get("WORKER_POLL_SECONDS", 0.5)),
        batch=int(app.config.get("WORKER_BATCH", DEFAULT_BATCH)),
        batch_seconds=float(app.config.get("WORKER_BATCH_SECONDS", DEFAULT_BATCH_SECONDS)),
    )


def warn_if_discovery_refused(app: Flask) -> None:
    """Log why this ticker's login cannot find due work, if it cannot."""
    try:
        problem = rotation.discovery_refused(ticker_database(app))
    except Exception as exc:  # noqa: BLE001 - the database may be away at start; ticks retry
        log.warning("could not check the ticker's login at start: %s", type(exc).__name__)
        return
    if problem:
        log.error("%s", problem)


def start(app: Flask, *, workers: bool = True) -> BackgroundScheduler:
    """Start the background ticker and worker threads for `app` (idempotent within a process)."""
    global _hosted, _pool
    with _lock:
        if _hosted is not None:
            return _hosted
        scheduler = BackgroundScheduler(timezone="UTC")
        period = float(app.config["TICK_SECONDS"])
        scheduler.add_job(
            _tick_job,
            "interval",
            args=[app],
            seconds=period,
            start_date=aligned_start(process_now(clock_offset(app.config)), period),
            id="almanac-tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        warn_if_discovery_refused(app)
        scheduler.start()
        pool = worker_pool(app).start() if workers else None
        atexit.register(stop)
        _hosted, _pool = scheduler, pool
        app.extensions["almanac.ticker"] = scheduler
        app.extensions["almanac.workers"] = pool
        return scheduler


def stop() -> None:
    """Shut the ticker down (waiting for a tick in progress), then the workers."""
    global _hosted, _pool
    with _lock:
        scheduler, pool = _hosted, _pool
        _hosted, _pool = None, None
    if scheduler is not None and scheduler.running:
        scheduler.shutdown(wait=True)
    if pool is not None:
        pool.stop()


def cli_command_other_than_run() -> bool:
    """True under `flask ...` unless the command is the dev server (`flask run`); `flask run
    --help` only prints, so it is not the server either."""
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        return False
    if help_only():
        return True
    words = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    return "run" not in words or "scheduler" in words


def serving_process() -> bool:
    """Whether this process serves the app: gunicorn, or `flask run`."""
    if os.environ.get("FLASK_RUN_FROM_CLI") == "true":
        return not cli_command_other_than_run()
    return "gunicorn" in Path(sys.argv[0]).name or "gunicorn" in Path(sys.argv[0]).parent.name


def start_if_enabled(app: Flask) -> None:
    """Start the ticker when `ALMANAC_SCHEDULER=on`, but not in the reloader's watcher process."""
    if not scheduler_enabled(app.config) or cli_command_other_than_run():
        return
    if app.debug and os.environ.get("WERKZEUG_RUN_MAIN") != "true":
        return
    if _loading_in_gunicorns_master():
        # `gunicorn --preload`: the master only forks the workers. Threads started here would be
        # forked mid-step (a child inheriting SQLite's allocator lock hangs for good), so each
        # worker starts its own ticker once forked, as it does without --preload.
        os.register_at_fork(after_in_child=lambda: start(app))
        return
    start(app)


def _loading_in_gunicorns_master() -> bool:
    """Whether gunicorn's master is loading the app (`--preload`), not a worker."""
    arbiter = sys.modules.get("gunicorn.arbiter")
    if arbiter is None:
        return False
    setup = arbiter.Arbiter.setup.__code__
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code is setup:
            return True
        frame = frame.f_back
    return False
