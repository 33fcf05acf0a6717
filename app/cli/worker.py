"""`worker [--queue Q]`: worker threads without the web or the ticker (docs/runs.md, README.md)."""

from __future__ import annotations

import re
import signal
import threading

import click
from flask import current_app

from app import heap
from app.api.run_models import QUEUE_MAX, QUEUE_NAME
from app.cli.schema import migrated
from app.ticker.host import worker_pool


def _queue(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A queue a run can name: an empty one fell back to the default queue in silence, and one
    the API refuses (a space, a slash) left the worker waiting on a queue no run can use."""
    if value is None:
        return None
    if len(value) > QUEUE_MAX or not re.fullmatch(QUEUE_NAME, value):
        raise click.BadParameter(
            f"{value!r} is not a queue name: 1 to {QUEUE_MAX} letters, digits, '.', '_' or "
            "'-', as a run's queue (omit --queue for the default queue)"
        )
    return value


@click.command("worker")
@click.option(
    "--queue",
    default=None,
    callback=_queue,
    help="Only run steps of this queue (default: the default queue).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=None,
    help="Worker threads (default: ALMANAC_WORKERS, 2).",
)
def worker(queue: str | None, threads: int | None) -> None:
    """Claim and run workflow steps until interrupted (SIGINT/SIGTERM finish the current step)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    migrated(app)
    heap.settle()
    if threads is None and int(app.config["WORKERS"]) < 1:
        raise click.UsageError("ALMANAC_WORKERS is 0: give this worker --threads (1 or more)")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    pool = worker_pool(app, queue=queue, size=threads).start()
    click.echo(f"{pool.size} worker threads on queue {queue or 'default'}; Ctrl-C stops", err=True)
    while not stop.wait(1.0):
        pass
    pool.stop()
    click.echo("workers stopped", err=True)
