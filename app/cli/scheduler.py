"""`scheduler run` (ticker without the web) and `scheduler tick` (one tick, printed)."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from typing import NoReturn

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.exc import DBAPIError

from app import heap
from app.cli.failures import DATABASE_FAILURES, cause, clean_error, ticker_variable
from app.cli.schema import migrated
from app.context import database, ticker_database
from app.db.clock import clock_offset, process_now
from app.db.session import log_failure
from app.ticker.host import aligned_start, warn_if_discovery_refused, worker_pool
from app.ticker.tick import run_tick

log = logging.getLogger(__name__)
scheduler = AppGroup("scheduler", help="The ticker.")


@scheduler.command("tick")
@click.option("--json", "as_json", is_flag=True, help="Print the tick as JSON.")
@click.option("--work", is_flag=True, help="Also run every runnable step.")
def tick(as_json: bool, work: bool) -> None:
    """Run one tick now and print its rows."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    db = ticker_database(app)
    try:
        # Reached first: a one-shot tick that cannot reach its database says so in one line.
        with db.engine.connect():
            pass
        # As `scheduler run` and `worker`: never write into tables older than this code.
        migrated(app, db)
    except click.ClickException as exc:
        _fail_before_tick(as_json, "schema", exc.message)
        raise
    except DATABASE_FAILURES as exc:
        _tick_failed(exc, as_json, ticker_variable(app))
    try:
        result = run_tick(app, work=work)
    except DATABASE_FAILURES as exc:
        # Away, or refused what the tick does outside its guarded phases: one line.
        _tick_failed(exc, as_json, ticker_variable(app, work=work))
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(
            f"tick at {result.to_json()['now']}: {len(result.rows)} rows, "
            f"{result.deadlines} deadlines, {result.steps} steps"
        )
        for row in result.rows:
            click.echo("  " + " ".join(f"{key}={value}" for key, value in row.items()))
        for failure in result.failures:
            where = f" {failure['where']}" if failure["where"] else ""
            click.echo(f"failed: {failure['phase']}{where}: {failure['cause']}", err=True)
    # A script or cron job driving ticks must see that part of this one failed.
    if result.failures:
        sys.exit(1)


def _tick_failed(exc: DBAPIError, as_json: bool, variable: str) -> NoReturn:
    """Exit 1 with one line (and with `--json` the tick's JSON) when the database is away or
    refused; anything else goes on as a bug, with its traceback."""
    error = clean_error(exc, variable)
    if error is None:
        raise exc
    _fail_before_tick(as_json, "tick", f"{cause(exc)} ({variable})")
    raise error from None


def _fail_before_tick(as_json: bool, phase: str, why: str) -> None:
    """With `--json`, a tick that did not run (or broke off) as a JSON object whose `failures`
    say why; its `now` and rows are unknown here. The one line on stderr follows either way."""
    if as_json:
        failure = {"phase": phase, "where": "", "cause": why}
        click.echo(
            json.dumps({"now": None, "rows": [], "deadlines": 0, "steps": 0, "failures": [failure]})
        )


@scheduler.command("run")
@click.option(
    "--workers",
    type=click.IntRange(0, 256),
    default=None,
    help="Worker threads beside the ticker (default: ALMANAC_WORKERS, 2; 0 for none).",
)
def run(workers: int | None) -> None:
    """Tick every ALMANAC_TICK_SECONDS and run workers until interrupted (SIGINT/SIGTERM).

    Ticks fall just after each whole period of the wall clock (every second by default), so an
    occurrence due on the second is fired at once; a tick that overran waits for the next one.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    # The ticker's database (ALMANAC_SCHEDULER_DATABASE_URL), and the workers' when it differs.
    migrated(app, ticker_database(app))
    if ticker_database(app) is not database(app):
        migrated(app)
    heap.settle()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    period = float(app.config["TICK_SECONDS"])
    offset = clock_offset(app.config)
    warn_if_discovery_refused(app)
    pool = worker_pool(app, size=workers).start()
    click.echo(f"ticking every {period}s with {pool.size} worker threads; Ctrl-C stops")
    try:
        stop.wait(_until_next_tick(period, offset))
        while not stop.is_set():
            try:
                run_tick(app, work=False)
            except Exception as exc:  # keep ticking: the next tick retries what this one could not
                log_failure(log, "tick failed", exc)
            stop.wait(_until_next_tick(period, offset))
    finally:
        pool.stop()


def _until_next_tick(period: float, offset_seconds: float = 0) -> float:
    """Seconds until the next whole period of this process's own clock (which only the
    test-only offset skews; what is due is decided on the database's clock)."""
    now = process_now(offset_seconds)
    return (aligned_start(now, period) - now).total_seconds()
