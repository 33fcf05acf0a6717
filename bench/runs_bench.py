"""Runs benchmark on SQLite and PostgreSQL: a linear and a parallel scenario.

Linear: N runs of `action -> wait PT1S -> action`. The wait is advanced with the manual clock (no
real sleeping): start N runs, run every runnable step (first action, entering the wait), move the
clock 1 s, let the deadline scanner elapse the waits, run the remaining steps. Prints runs/s and
steps/s (3 steps per run) per phase and overall.

Parallel: N runs of one parallel step with 5 branches (capacity 2) of 2 actions each: 10 action
steps per run, run until none is left. Prints action steps/s and the p99 step latency (from the
claim transaction that leased a step to the commit of its result).

Processes (`--processes 2`, PostgreSQL only): the linear scenario with real `flask --app wsgi
worker` processes on default settings, on a database set up as in production (`db create-roles`
and `db upgrade` as the owner, the workers logged in as `almanac_app`) and the system clock (the
database's). The bench starts the workers, waits until they poll, starts N runs in one
transaction, and from outside counts completed runs until all are done; meanwhile it applies due
waits every 0.1 s as the ticker would (the PT1S wait is real time: it is inside the measured wall
time). steps/s = 3 N / (all completed - runs visible).

    .venv/bin/python bench/runs_bench.py                  # both databases and scenarios
    .venv/bin/python bench/runs_bench.py --db sqlite -n 2000 --threads 1 --scenario parallel
    .venv/bin/python bench/runs_bench.py --db postgres --processes 2 -n 10000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import case, create_engine, func, select, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import create_app  # noqa: E402
from app.auth.service import create_namespace  # noqa: E402
from app.cli.database import upgrade_database  # noqa: E402
from app.context import clock, database  # noqa: E402
from app.db import Base, Run, RunHistoryEvent, normalize_url  # noqa: E402
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


PARALLEL = {
    "name": "bench",
    "steps": [
        {
            "id": "fan",
            "type": "parallel",
            "max_concurrency": 2,
            "branches": [
                {
                    "id": f"b{b}",
                    "steps": [
                        {"id": f"b{b}-one", "type": "action", "action": "noop"},
                        {"id": f"b{b}-two", "type": "action", "action": "noop"},
                    ],
                }
                for b in range(5)
            ],
        }
    ],
}


def _timed(label: str, fn: Callable[[], int], n_runs: int) -> float:
    began = time.perf_counter()
    count = fn()
    took = time.perf_counter() - began
    print(f"  {label:<28} {took:8.2f} s  {count:>7} done  {n_runs / took:9.0f} runs/s")
    return took


def _work(app, threads: int, batch: int, latencies: list[float] | None = None) -> int:
    """Run every runnable step with `threads` in-process workers; return the steps advanced.

    With `latencies`, each step advanced gets the wall time of the claim-execute-commit cycle
    that advanced it.
    """
    done = [0] * threads

    def loop(index: int) -> None:
        settings = engine.WorkerSettings(name=f"bench-{index}", queue=engine.ANY_QUEUE, batch=batch)
        while True:
            began = time.perf_counter()
            advanced = engine.work_once(database(app), clock(app), settings)
            if not advanced:
                return
            if latencies is not None:
                latencies.extend([time.perf_counter() - began] * advanced)
            done[index] += advanced

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(done)


def _start_runs(app, n_runs: int, definition: dict, batch: int = 500) -> int:
    db = database(app)
    with db.session() as session:
        namespace = create_namespace(session, START, "bench")
        workflows.deploy(session, START, namespace, definition)
        workflows.activate(session, START, namespace, "bench")
        session.commit()
        target = lifecycle.resolve_target(session, namespace, workflow="bench")
        for first in range(0, n_runs, batch):
            for index in range(first, min(first + batch, n_runs)):
                lifecycle.start_run(session, START, namespace, target, f"bench-{index}", {})
            session.commit()
    return n_runs


def _app(url: str, *, manual: bool = True):
    app = create_app(
        {
            "TESTING": True,
            "DATABASE_URL": url,
            "SCHEDULER": "off",
            "CLOCK": "manual" if manual else "system",
            "SECRET_KEY": "bench",
        }
    )
    db = database(app)
    if db.is_sqlite:
        Base.metadata.create_all(db.engine)
    # Workers see every namespace (as `worker_pool` binds them); so does the setup here.
    db.scope = Scope.all()
    if manual:
        with db.session() as session:
            clock(app).set(session, START)  # type: ignore[union-attr]
            session.commit()
    return app, db


def _completed(db) -> int:
    with db.session() as session:
        return session.scalar(
            select(func.count()).select_from(Run).where(Run.status == "completed")
        )


def bench(url: str, n_runs: int, threads: int, batch: int) -> None:
    app, db = _app(url)
    print(
        f"{db.engine.dialect.name}: {n_runs} runs x 3 steps, {threads} worker thread(s), "
        f"{batch} run(s) claimed per transaction"
    )
    create = _timed("start runs", lambda: _start_runs(app, n_runs, DEFINITION), n_runs)
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
    completed = _completed(db)
    assert completed == n_runs, f"only {completed} of {n_runs} runs completed"
    execute = phase1 + scan + phase2
    print(
        f"  executing: {n_runs / execute:.0f} runs/s, {3 * n_runs / execute:.0f} steps/s "
        f"({execute:.1f} s); including creation: {n_runs / (execute + create):.0f} runs/s, "
        f"{3 * n_runs / (execute + create):.0f} steps/s"
    )
    db.dispose()


def bench_parallel(url: str, n_runs: int, threads: int, batch: int) -> None:
    app, db = _app(url)
    print(
        f"{db.engine.dialect.name}: {n_runs} runs x parallel(5 branches, capacity 2) x 2 actions, "
        f"{threads} worker thread(s), {batch} step(s) claimed per transaction"
    )
    create = _timed("start runs", lambda: _start_runs(app, n_runs, PARALLEL), n_runs)
    latencies: list[float] = []
    took = _timed("all steps", lambda: _work(app, threads, batch, latencies), n_runs)
    completed = _completed(db)
    assert completed == n_runs, f"only {completed} of {n_runs} runs completed"
    with db.session() as session:
        started = session.scalar(
            select(func.count())
            .select_from(RunHistoryEvent)
            .where(RunHistoryEvent.event_type == "step_started")
        )
    # Each run enters its parallel step once and leases each of its 10 actions exactly once.
    assert started == 11 * n_runs, f"{started} step_started events, expected {11 * n_runs}"
    actions = 10 * n_runs
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    print(
        f"  executing: {actions / took:.0f} action steps/s ({took:.1f} s; {len(latencies)} steps "
        f"incl. entering the parallel step); step latency p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
        f"including creation: {actions / (took + create):.0f} action steps/s"
    )
    db.dispose()


ROOT = Path(__file__).resolve().parent.parent


def _spawn_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    """`flask --app wsgi worker` with default settings, logged in as `url`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ALMANAC_") and not key.startswith("FLASK_")
    }
    env |= {"ALMANAC_DATABASE_URL": url, "ALMANAC_SECRET_KEY": "bench", "PYTHONPATH": str(ROOT)}
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "wsgi", "worker"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=sink,
        )


def _progress(db) -> tuple[int, int]:
    """(runs past their first action, runs completed)."""
    with db.session() as session:
        row = session.execute(
            select(
                func.count(case((Run.step_index >= 1, 1))),
                func.count(case((Run.status == "completed", 1))),
            )
        ).one()
        return int(row[0]), int(row[1])


def bench_processes(url: str, n_runs: int, processes: int, timeout: float = 900.0) -> None:
    """The linear scenario run by `processes` real worker processes, measured from outside."""
    app, db = _app(url, manual=False)
    print(
        f"{db.engine.dialect.name}: {n_runs} runs x 3 steps, {processes} `flask --app wsgi worker` "
        "process(es), default settings, system clock"
    )
    with db.session() as session:
        namespace = create_namespace(session, START, "bench")
        workflows.deploy(session, START, namespace, DEFINITION)
        workflows.activate(session, START, namespace, "bench")
        session.commit()
    with tempfile.TemporaryDirectory() as tmp:
        logs = [Path(tmp) / f"worker-{i}.log" for i in range(processes)]
        workers = [_spawn_worker(url, log) for log in logs]
        try:
            give_up = time.monotonic() + 60
            while not all("worker threads" in log.read_text() for log in logs):
                assert time.monotonic() < give_up, [log.read_text() for log in logs]
                assert all(w.poll() is None for w in workers), [log.read_text() for log in logs]
                time.sleep(0.1)
            began = time.perf_counter()
            with db.session() as session:
                target = lifecycle.resolve_target(session, namespace, workflow="bench")
                now = clock(app).now(session)
                for index in range(n_runs):
                    lifecycle.start_run(session, now, namespace, target, f"bench-{index}", {})
                session.commit()
            t0 = time.perf_counter()
            print(f"  start runs (one transaction)   {t0 - began:8.2f} s")
            first_done = completed = 0
            t_first = None
            while completed < n_runs:
                assert time.perf_counter() - t0 < timeout, f"{completed} of {n_runs} completed"
                with db.session() as session:
                    now = clock(app).current(session)
                deadlines.scan(db, now)  # what the ticker does each tick
                first_done, completed = _progress(db)
                if t_first is None and first_done == n_runs:
                    t_first = time.perf_counter()
                if completed < n_runs:
                    time.sleep(0.1)
            t_end = time.perf_counter()
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(30)
        errors = [log.read_text() for log in logs if "Traceback" in log.read_text()]
        assert not errors, errors[0][-3000:]
    took = t_end - t0
    with db.session() as session:
        counts = dict(
            session.execute(
                select(RunHistoryEvent.event_type, func.count()).group_by(
                    RunHistoryEvent.event_type
                )
            ).all()
        )
        failed = session.execute(
            select(RunHistoryEvent.payload).where(RunHistoryEvent.event_type == "step_failed")
        ).scalars()
        released = sorted({str(p.get("error", {}).get("type")) for p in failed})
    # Each run: 3 step_started (two actions, the wait); more means a step was claimed again.
    assert counts.get("step_completed") == 3 * n_runs, counts
    assert counts.get("run_completed") == n_runs, counts
    again = counts.get("step_started", 0) - 3 * n_runs
    first = (t_first or t_end) - t0
    print(f"  first actions + enter wait     {first:8.2f} s  {n_runs / first:9.0f} runs/s")
    print(
        f"  all completed                  {took:8.2f} s  (incl. the 1 s real wait)\n"
        f"  executing: {n_runs / took:.0f} runs/s, {3 * n_runs / took:.0f} steps/s; "
        f"steps claimed again: {again} {released or ''}"
    )
    db.dispose()


def _scenarios(args: argparse.Namespace) -> list[tuple[Callable[..., None], int]]:
    chosen = []
    if args.scenario in ("linear", "both"):
        chosen.append((bench, args.runs))
    if args.scenario in ("parallel", "both"):
        chosen.append((bench_parallel, args.parallel_runs))
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("-n", "--runs", type=int, default=10_000)
    parser.add_argument("--scenario", choices=["linear", "parallel", "both"], default="both")
    parser.add_argument("--parallel-runs", type=int, default=2_000)
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
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="run the linear scenario with this many real `worker` processes (PostgreSQL only)",
    )
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    if args.processes:
        _on_postgres(args, bench_processes, args.runs)
        return
    for scenario, n_runs in _scenarios(args):
        if args.db in ("sqlite", "both"):
            with tempfile.TemporaryDirectory() as tmp:
                scenario(f"sqlite:///{tmp}/bench.db", n_runs, args.threads or 1, args.batch)
        if args.db in ("postgres", "both"):
            _on_postgres(args, scenario, n_runs)


def _on_postgres(args: argparse.Namespace, scenario: Callable[..., None], n_runs: int) -> None:
    """Run `scenario` in a fresh PostgreSQL database, dropped afterwards: migrated by the owner
    and worked as the app login under row security, as in production."""
    admin = create_engine(normalize_url(args.postgres_url), isolation_level="AUTOCOMMIT")
    name = f"almanac_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(normalize_url(args.postgres_url)).set(database=name)
    owner = url.render_as_string(hide_password=False)
    try:
        engine = create_engine(owner)
        with engine.begin() as conn:
            create_roles(conn)
        engine.dispose()
        upgrade_database(owner)
        login = url.set(username=APP_ROLE, password=None).render_as_string(hide_password=False)
        if scenario is bench_processes:
            scenario(login, n_runs, args.processes)
        else:
            scenario(login, n_runs, args.threads or 4, args.batch)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
