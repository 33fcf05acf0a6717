"""`worker [--queue Q]`: worker threads without the web or the ticker (docs/runs.md, README.md)."""

from __future__ import annotations

import signal
import threading

import click
from flask import current_app

from app import heap
from app.cli.schema import migrated
from app.ticker.host import worker_pool


@click.command("worker")
@click.option(
    "--queue", default=None, help="Only run steps of this queue (default: the default queue)."
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
