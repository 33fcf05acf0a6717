"""Runs benchmark: N runs of `action -> wait PT1S -> action`, on SQLite and PostgreSQL.

The wait is advanced with the manual clock (no real sleeping): start N runs, run every runnable
step (first action, entering the wait), move the clock 1 s, let the deadline scanner elapse the
waits, run the remaining steps. Prints runs/s and steps/s (3 steps per run) per phase and overall.

    .venv/bin/python bench/runs_bench.py                  # both databases, N=10000
    .venv/bin/python bench/runs_bench.py --db sqlite -n 2000 --threads 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import create_app  # noqa: E402
from app.auth.service import create_namespace  # noqa: E402
from app.cli.database import upgrade_database  # noqa: E402
from app.context import clock, database  # noqa: E402
from app.db import Base, Run, normalize_url  # noqa: E402
from app.db.rls import Scope  # noqa: E402
from app.db.roles import APP_ROLE, create_roles  # noqa: E402
from app.runs import deadlines, engine, lifecycle, workflows  # noqa: E402

START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
DEFINITION = {
    "name": "bench",
    "steps": [
        {"id": "first", "type": "action", "action": "noop"},
        {"id": "pause", "type": "wait", "duration": "PT1S"},
        {"id": "second", "type": "action", "action": "noop"},
    ],
}


def _timed(label: str, fn: Callable[[], int], n_runs: int) -> float:
    began = time.perf_counter()
    count = fn()
    took = time.perf_counter() - began
    print(f"  {label:<28} {took:8.2f} s  {count:>7} done  {n_runs / took:9.0f} runs/s")
    return took


def _work(app, threads: int, batch: int) -> int:
    """Run every runnable step with `threads` in-process workers; return the steps advanced."""
    done = [0] * threads

    def loop(index: int) -> None:
        settings = engine.WorkerSettings(name=f"bench-{index}", queue=engine.ANY_QUEUE, batch=batch)
        while advanced := engine.work_once(database(app), clock(app), settings):
            done[index] += advanced

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(done)


def _start_runs(app, n_runs: int, batch: int = 500) -> int:
    db = database(app)
    with db.session() as session:
        namespace = create_namespace(session, START, "bench")
        workflows.deploy(session, START, namespace, DEFINITION)
        workflows.activate(session, START, namespace, "bench")
        session.commit()
        target = lifecycle.resolve_target(session, namespace, workflow="bench")
        for first in range(0, n_runs, batch):
            for index in range(first, min(first + batch, n_runs)):
                lifecycle.start_run(session, START, namespace, target, f"bench-{index}", {})
            session.commit()
    return n_runs


def bench(url: str, n_runs: int, threads: int, batch: int) -> None:
    app = create_app(
        {
            "TESTING": True,
            "DATABASE_URL": url,
            "SCHEDULER": "off",
            "CLOCK": "manual",
            "SECRET_KEY": "bench",
        }
    )
    db = database(app)
    if db.is_sqlite:
        Base.metadata.create_all(db.engine)
    # Workers see every namespace (as `worker_pool` binds them); so does the setup here.
    db.scope = Scope.all()
    with db.session() as session:
        clock(app).set(session, START)  # type: ignore[union-attr]
        session.commit()
    print(
        f"{db.engine.dialect.name}: {n_runs} runs x 3 steps, {threads} worker thread(s), "
        f"{batch} run(s) claimed per transaction"
    )
    create = _timed("start runs", lambda: _start_runs(app, n_runs), n_runs)
    phase1 = _timed("first action + enter wait", lambda: _work(app, threads, batch), n_runs)
    with db.session() as session:
        clock(app).set(session, START + timedelta(seconds=1))  # type: ignore[union-attr]
        session.commit()
    scan = _timed(
        "deadline scan (waits)",
        lambda: deadlines.scan(db, START + timedelta(seconds=1)).applied,
        n_runs,
    )
    phase2 = _timed("second action + complete", lambda: _work(app, threads, batch), n_runs)
    with db.session() as session:
        completed = session.scalar(
            select(func.count()).select_from(Run).where(Run.status == "completed")
        )
    assert completed == n_runs, f"only {completed} of {n_runs} runs completed"
    execute = phase1 + scan + phase2
    print(
        f"  executing: {n_runs / execute:.0f} runs/s, {3 * n_runs / execute:.0f} steps/s "
        f"({execute:.1f} s); including creation: {n_runs / (execute + create):.0f} runs/s, "
        f"{3 * n_runs / (execute + create):.0f} steps/s"
    )
    db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("-n", "--runs", type=int, default=10_000)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="worker threads (default: 1 on SQLite, 4 on PostgreSQL)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=25,
        help="runs a worker claims per transaction (ALMANAC_WORKER_BATCH)",
    )
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            bench(f"sqlite:///{tmp}/bench.db", args.runs, args.threads or 1, args.batch)
    if args.db in ("postgres", "both"):
        admin = create_engine(normalize_url(args.postgres_url), isolation_level="AUTOCOMMIT")
        name = f"almanac_bench_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(normalize_url(args.postgres_url)).set(database=name)
        owner = url.render_as_string(hide_password=False)
        # As in production: migrated by the owner, worked as the app login under row security.
        engine = create_engine(owner)
        with engine.begin() as conn:
            create_roles(conn)
        engine.dispose()
        upgrade_database(owner)
        login = url.set(username=APP_ROLE, password=None).render_as_string(hide_password=False)
        try:
            bench(login, args.runs, args.threads or 4, args.batch)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
