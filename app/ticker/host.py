"""Hosts the tick loop in a process with APScheduler 3's BackgroundScheduler."""

from __future__ import annotations

import atexit
import logging
import os
import sys

from apscheduler.schedulers.background import BackgroundScheduler
from flask import Flask

from app.ticker.tick import scheduler_enabled, run_tick

log = logging.getLogger(__name__)

# One ticker per process, however many apps the process builds.
_hosted: BackgroundScheduler | None = None


def _tick_job(app: Flask) -> None:
    try:
        run_tick(app, work=False)
    except Exception:  # a failed tick must not kill the scheduler thread; the next one retries
        log.exception("tick failed")


def start(app: Flask) -> BackgroundScheduler:
    """Start the background ticker for `app` (idempotent within a process)."""
    global _hosted
    if _hosted is not None:
        return _hosted
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(
        _tick_job, "interval", args=[app], seconds=float(app.config["TICK_SECONDS"]),
        id="almanac-tick", max_instances=1, coalesce=True, misfire_grace_time=None,
    )
    scheduler.start()
    atexit.register(lambda: scheduler.shutdown(wait=True))
    _hosted = scheduler
    app.extensions["almanac.ticker"] = scheduler
    return scheduler


def _cli_command_other_than_run() -> bool:
    """True under `flask ...` unless the command is the dev server (`flask run`)."""
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        return False
    words = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    return "run" not in words or "scheduler" in words


def start_if_enabled(app: Flask) -> None:
    """Start the ticker when `ALMANAC_SCHEDULER=on`, but not in the reloader's watcher process."""
    if not scheduler_enabled(app.config) or _cli_command_other_than_run():
        return
    if app.debug and os.environ.get("WERKZEUG_RUN_MAIN") != "true":
        return
    start(app)
