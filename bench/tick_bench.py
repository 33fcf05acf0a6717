"""Benchmark: one tick firing N schedules due in the same second, against APScheduler 3.

Run: .venv/bin/python bench/tick_bench.py [--count 10000] [--big 100000] [--skip-peer]
     [--db sqlite|postgres|both] [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
     [--writers N] [--rounds N]

Almanac: N schedules (`0 12 * * *`, all due at 12:00:00) in a fresh database; one process runs
the tick's fire phase until nothing is due. fires/s = N / wall time; lag = time from the start of
the tick (the due second) to the commit of the page that started the run; peak RSS of the
process (each measurement runs in its own subprocess). APScheduler 3.11: a BackgroundScheduler
with a SQLAlchemyJobStore on the same kind of database and N cron jobs that do nothing, all due
at the same second; fires/s from its EVENT_JOB_EXECUTED listener. `POST /admin/tick`: the same
N schedules served by a real server process (gunicorn, the manual clock at the due second), one
request after another until a tick starts nothing; fires/s = N / the requests' wall time.
`--writers N` sets `ALMANAC_TICK_WRITERS` (pages a PostgreSQL tick writes at once) for both.
`--rounds N` repeats the three measurements N times, each round in another order, and prints
each round's ratio and their median: on a shared machine one round's ratio moves with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
from sqlalchemy import create_engine, insert, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app import heap  # noqa: E402
from app.cli.database import upgrade_database  # noqa: E402
from app.db import (  # noqa: E402
    Activation,
    Base,
    Database,
    Membership,
    Namespace,
    Schedule,
    User,
    Workflow,
    WorkflowVersion,
    make_engine,
    normalize_url,
)
from app.db.rls import Scope  # noqa: E402
from app.db.roles import SCHEDULER_ROLE, create_roles  # noqa: E402
from app.schedules.tick.due import fire_due  # noqa: E402
from app.settings import DEFAULTS  # noqa: E402
from app.ticker.rotation import PHASE_LIMITS  # noqa: E402

DUE = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
ADMIN_TOKEN = "alm_bench_token_for_ticks"


def _seed(db: Database, count: int) -> None:
    """One namespace (`default`, made here unless it exists), one operator, one ready
    activation and `count` due schedules (Core)."""
    with db.engine.begin() as conn:
        ns = conn.execute(select(Namespace.id).where(Namespace.name == "default")).scalar()
        if ns is None:
            ns = conn.execute(
                insert(Namespace).values(name="default", created_at=DUE).returning(Namespace.id)
            ).scalar_one()
        user = conn.execute(
            insert(User)
            .values(username="bench", password_hash="x", is_superuser=False, created_at=DUE)
            .returning(User.id)
        ).scalar_one()
        conn.execute(insert(Membership).values(user_id=user, namespace_id=ns, role="operator"))
        flow = conn.execute(
            insert(Workflow)
            .values(namespace_id=ns, name="noop", created_at=DUE)
            .returning(Workflow.id)
        ).scalar_one()
        definition = {
            "name": "noop",
            "input_schema": {"type": "object"},
            "steps": [{"id": "a", "type": "action", "action": "noop"}],
        }
        version = conn.execute(
            insert(WorkflowVersion)
            .values(
                workflow_id=flow,
                version=1,
                definition=definition,
                created_at=DUE,
            )
            .returning(WorkflowVersion.id)
        ).scalar_one()
        activation = str(uuid.uuid4())
        conn.execute(
            insert(Activation).values(
                id=activation,
                namespace_id=ns,
                workflow_id=flow,
                workflow_version_id=version,
                status="ready",
                created_at=DUE,
            )
        )
        spec = {
            "cron_expressions": ["0 12 * * *"],
            "intervals": [],
            "timezone": "UTC",
            "start_at": None,
            "end_at": None,
        }
        action = {
            "workflow": None,
            "activation_id": activation,
            "input": {},
            "execution_timeout_seconds": None,
            "run_timeout_seconds": None,
            "queue": None,
        }
        batch = []
        for index in range(count):
            batch.append(
                {
                    "uid": str(uuid.uuid4()),
                    "namespace_id": ns,
                    "schedule_id": f"s{index:06d}",
                    "revision": 1,
                    "status": "active",
                    "principal_id": user,
                    "workflow_name": "noop",
                    "spec": spec,
                    "action": action,
                    "overlap_policy": "skip",
                    "missed_policy": "skip",
                    "jitter_seconds": 0,
                    "labels": {},
                    "memo": {},
                    "search_attributes": {},
                    "cursor_at": DUE - timedelta(hours=1),
                    "next_occurrence": DUE,
                    "next_fire_at": DUE,
                    "fires_count": 0,
                    "skipped_trigger_count": 0,
                    "buffered_count": 0,
                    "history_sequence": 0,
                    "created_at": DUE,
                    "updated_at": DUE,
                }
            )
            if len(batch) == 5000:
                conn.execute(insert(Schedule), batch)
                batch = []
        if batch:
            conn.execute(insert(Schedule), batch)


def measure_almanac(url: str, count: int) -> dict[str, Any]:
    """Seed, then fire everything in one tick's fire phase; returns the figures.

    On PostgreSQL the database is migrated by its owner (row-level security on) and the fire
    phase runs as it does in production: as `almanac_scheduler`, bound to the namespace, with
    the phase's statement and lock timeouts.
    """
    # As in `scheduler run`, whose app sets the interpreter's thread switch interval: the tick
    # decides one page while a writer thread sends the last one.
    sys.setswitchinterval(float(DEFAULTS["GIL_SWITCH_INTERVAL"]))
    owner = Database(url)
    # TICK_BENCH_OWNER=1 fires as the owner without row security (to measure what it costs).
    if owner.is_sqlite or os.environ.get("TICK_BENCH_OWNER") == "1":
        Base.metadata.create_all(owner.engine)
        db = owner
    else:
        with owner.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(7310013)"))
            create_roles(conn)
        upgrade_database(url)
        login = make_url(url).set(username=SCHEDULER_ROLE, password=None)
        scope = Scope.of([1]).limited(**PHASE_LIMITS)
        db = Database(login.render_as_string(hide_password=False)).bound(scope)
    _seed(owner, count)
    # As `scheduler run` does once it has loaded what it keeps (app/heap.py).
    heap.settle()
    commits: list[tuple[float, int]] = []
    started = time.perf_counter()
    rows = fire_due(
        db,
        DUE,
        timedelta(seconds=60),
        budget_deadline=time.monotonic() + 3600,
        on_page=lambda claimed: commits.append((time.perf_counter(), claimed)),
        writers=int(os.environ.get("ALMANAC_TICK_WRITERS") or DEFAULTS["TICK_WRITERS"]),
    )
    elapsed = time.perf_counter() - started
    lags = _weighted_quantiles([(stamp - started, claimed) for stamp, claimed in commits])
    with owner.engine.connect() as conn:
        runs = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
    db.dispose()
    owner.dispose()
    fired = sum(1 for row in rows if row["outcome"] == "triggered")
    assert fired == count == runs, (fired, count, runs)
    return {
        "fires": fired,
        "seconds": elapsed,
        "fires_per_s": fired / elapsed,
        "p50_lag_s": lags[0.5],
        "p99_lag_s": lags[0.99],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure_admin_tick(url: str, count: int) -> dict[str, Any]:
    """The tick as an operator drives it: a real server process (gunicorn, one worker, the
    ticker off, the manual clock) with `count` schedules due, and `POST /admin/tick` repeated
    until a tick starts nothing. fires/s = runs started / the requests' wall time. On
    PostgreSQL the server logs in as `almanac_app` and its ticker as `almanac_scheduler`."""
    env = {
        **os.environ,
        "ALMANAC_SCHEDULER": "off",
        "ALMANAC_SECRET_KEY": "bench",
        "ALMANAC_TESTING": "1",
        "ALMANAC_CLOCK": "manual",
        "ALMANAC_ADMIN_PASSWORD": "bench-password",
        "ALMANAC_ADMIN_TOKEN": ADMIN_TOKEN,
        "ALMANAC_MIGRATION_DATABASE_URL": url,
        "ALMANAC_DATABASE_URL": url,
    }
    if not url.startswith("sqlite"):
        for variable, role in (
            ("ALMANAC_DATABASE_URL", "almanac_app"),
            ("ALMANAC_SCHEDULER_DATABASE_URL", SCHEDULER_ROLE),
        ):
            login = make_url(url).set(username=role, password=None)
            env[variable] = login.render_as_string(hide_password=False)
        _flask(env, "db", "create-roles")
    _flask(env, "db", "upgrade")
    _flask(env, "admin", "bootstrap")
    owner = Database(url)
    _seed(owner, count)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--threads", "4", "--timeout", "600", "wsgi:app"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}/api/v1"
    client = requests.Session()
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    try:
        for _ in range(600):
            try:
                if client.get(base + "/health", timeout=10).status_code in (200, 503):
                    break
            except requests.RequestException:
                time.sleep(0.1)
        moved = client.post(base + "/admin/clock", json={"now": DUE.isoformat()}, timeout=60)
        assert moved.status_code == 200, moved.text
        fired, ticks, elapsed = 0, 0, 0.0
        while True:
            began = time.perf_counter()
            response = client.post(base + "/admin/tick", json={}, timeout=600)
            elapsed += time.perf_counter() - began
            assert response.status_code == 200, response.text
            body = response.json()
            assert not body["failures"], body["failures"]
            started = sum(1 for row in body["rows"] if row["outcome"] == "triggered")
            if not started:
                elapsed -= time.perf_counter() - began  # the empty tick that ends it
                break
            fired, ticks = fired + started, ticks + 1
    finally:
        server.terminate()
        server.wait(timeout=60)
    with owner.engine.connect() as conn:
        runs = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
    owner.dispose()
    assert fired == count == runs, (fired, count, runs)
    return {"fires": fired, "seconds": elapsed, "fires_per_s": fired / elapsed, "ticks": ticks}


def _flask(env: dict[str, str], *args: str) -> None:
    command = [sys.executable, "-m", "flask", "--app", "wsgi", *args]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)


def _weighted_quantiles(pages: list[tuple[float, int]]) -> dict[float, float]:
    """p50/p99 of per-run lags, where each page's runs share its commit time."""
    total = sum(claimed for _, claimed in pages)
    result, seen = {}, 0
    for lag, claimed in pages:
        seen += claimed
        for q in (0.5, 0.99):
            if q not in result and seen >= q * total:
                result[q] = lag
    return result


def measure_peer(url: str, count: int) -> dict[str, Any]:
    """APScheduler 3: `count` no-op cron jobs due at the same second, SQLAlchemyJobStore(url=)."""
    from apscheduler.events import EVENT_JOB_EXECUTED
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    # The jobs' next run is stored as `due`; on a loaded machine storing may end after it, and
    # the jobs are then overdue (within their grace) when the scheduler starts, all at once.
    lead = timedelta(seconds=5 + count / 400)
    due = (datetime.now(UTC) + lead).replace(microsecond=0)
    trigger = CronTrigger(hour=due.hour, minute=due.minute, second=due.second, timezone="UTC")
    _load_peer_jobs(url, count, trigger, due)
    # The peer as its users run it: the job store built from a URL, with its own defaults.
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=normalize_url(url))},
        executors={"default": ThreadPoolExecutor(20)},
        timezone="UTC",
        job_defaults={"misfire_grace_time": 3600, "coalesce": True},
    )
    done = threading.Event()
    executed: list[float] = []

    def listener(_event: Any) -> None:
        executed.append(time.perf_counter())
        if len(executed) >= count:
            done.set()

    scheduler.add_listener(listener, EVENT_JOB_EXECUTED)
    wait = (due - datetime.now(UTC)).total_seconds()
    if wait > 0:
        time.sleep(wait)
    started = time.perf_counter()
    scheduler.start()
    # Bounded: a peer that stalls is reported with what it fired, not waited on for an hour.
    done.wait(timeout=max(300.0, count / 20))
    scheduler.shutdown(wait=False)
    assert executed, "APScheduler fired nothing"
    elapsed = executed[-1] - started
    lags = [stamp - started for stamp in executed]
    return {
        "fires": len(executed),
        "complete": len(executed) >= count,
        "seconds": elapsed,
        "fires_per_s": len(executed) / elapsed,
        "p50_lag_s": statistics.median(lags),
        "p99_lag_s": statistics.quantiles(lags, n=100)[98] if len(lags) > 1 else lags[0],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _load_peer_jobs(url: str, count: int, trigger: Any, due: datetime) -> None:
    """Store the jobs through APScheduler's own job store, on a fast engine (not measured).

    No scheduler thread runs while loading: a (paused) loading scheduler, once shut down,
    still looks for due jobs one last time with its executors gone, and moved every job that
    was due by then to the next day, so the measured scheduler found none.
    """
    from apscheduler.job import Job
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    engine = make_engine(url)
    owner = BackgroundScheduler(timezone="UTC")  # never started: the jobs' owner on paper
    store = SQLAlchemyJobStore(engine=engine)
    store.start(owner, "default")
    for index in range(count):
        store.add_job(
            Job(
                owner,
                id=f"job{index}",
                func=_noop,
                trigger=trigger,
                executor="default",
                args=(),
                kwargs={},
                name="_noop",
                misfire_grace_time=3600,
                coalesce=True,
                max_instances=1,
                next_run_time=due,
            )
        )
    sqlite = engine.dialect.name == "sqlite"
    engine.dispose()
    if sqlite:
        # Back to SQLite's default journal for the measured run.
        with sqlite3.connect(make_url(url).database or "") as conn:
            conn.execute("PRAGMA journal_mode=DELETE")


def _noop() -> None:
    return None


class Backend:
    """A fresh database per measurement: a temporary SQLite file or a new PostgreSQL one."""

    def __init__(self, kind: str, pg_url: str) -> None:
        self.kind, self.pg_url = kind, pg_url

    def fresh(self) -> tuple[str, Any]:
        if self.kind == "sqlite":
            folder = tempfile.mkdtemp(prefix="tick-bench-")
            return f"sqlite:///{folder}/bench.db", None
        admin = create_engine(normalize_url(self.pg_url), isolation_level="AUTOCOMMIT")
        name = f"tick_bench_{uuid.uuid4().hex[:10]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(normalize_url(self.pg_url)).set(database=name)

        def drop() -> None:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()

        return url.render_as_string(hide_password=False), drop


def run_child(which: str, kind: str, count: int, pg_url: str) -> dict[str, Any]:
    """Measure in a subprocess so peak RSS belongs to that measurement alone."""
    command = [
        sys.executable,
        __file__,
        "--child",
        which,
        "--backend",
        kind,
        "--count",
        str(count),
        "--postgres",
        pg_url,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        # One failed measurement (a peer that crashed, the database restarted under it) is
        # reported as such; the other lines still print.
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"error": lines[-1][:200]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def child(which: str, kind: str, count: int, pg_url: str) -> None:
    url, cleanup = Backend(kind, pg_url).fresh()
    try:
        measure = {"almanac": measure_almanac, "peer": measure_peer, "admin": measure_admin_tick}[
            which
        ]
        print(json.dumps(measure(url, count)))
    finally:
        if cleanup:
            cleanup()


NAMES = {
    "almanac": "Almanac tick",
    "admin": "Almanac, POST /admin/tick",
    "peer": "APScheduler 3 + SQLAlchemyJobStore",
}


def _ratios(
    kind: str, args: argparse.Namespace, results: list[tuple[int, str, int, dict[str, Any]]]
) -> None:
    """Print each round's ratios to the peer, their median, and the big run's memory."""
    figures = {(t, w, n): f for t, w, n, f in results if "error" not in f}
    for label, which in (("tick", "almanac"), ("POST /admin/tick", "admin")):
        ratios = [
            figures[(t, which, args.count)]["fires_per_s"]
            / figures[(t, "peer", args.count)]["fires_per_s"]
            for t in range(args.rounds)
            if (t, which, args.count) in figures and (t, "peer", args.count) in figures
        ]
        if not ratios:
            continue
        each = " / ".join(f"{r:.1f}x" for r in ratios)
        median = f" (median {statistics.median(ratios):.1f}x)" if len(ratios) > 1 else ""
        print(f"{kind}: Almanac {label} / APScheduler fires/s = {each}{median}")
    ours, big = figures.get((0, "almanac", args.count)), figures.get((0, "almanac", args.big))
    if ours and big:
        print(
            f"{kind}: peak RSS at N={args.big:,} / N={args.count:,} = "
            f"{big['peak_rss_mib'] / ours['peak_rss_mib']:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=100_000, help="0 skips the big run")
    parser.add_argument(
        "--postgres", default=os.environ.get("ALMANAC_TEST_POSTGRES_URL", PG_DEFAULT)
    )
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--writers", type=int, help="ALMANAC_TICK_WRITERS (default: the app's)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat the comparison, its order rotated"
    )
    parser.add_argument("--child", choices=tuple(NAMES))
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    if args.writers:
        os.environ["ALMANAC_TICK_WRITERS"] = str(args.writers)
    if args.child:
        child(args.child, args.backend, args.count, args.postgres)
        return
    print(
        f"# tick benchmark — {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start"
    )
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    compared = [("almanac", args.count), ("admin", args.count), ("peer", args.count)]
    results: list[tuple[str, int, str, int, dict[str, Any]]] = []
    for kind in kinds:
        for turn in range(args.rounds):
            # Each round rotates the order, so a change in the machine's load does not fall
            # on one scheduler alone.
            plan = compared[turn % 3 :] + compared[: turn % 3]
            if args.big and turn == 0:
                plan.insert(1, ("almanac", args.big))
            for which, count in plan:
                if which == "peer" and args.skip_peer:
                    continue
                figures = run_child(which, kind, count, args.postgres)
                results.append((kind, turn, which, count, figures))
    header = (
        "| database | round | scheduler | N | fires/s | p50 lag s | p99 lag s | peak RSS MiB |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|"
    )
    print(header)
    for kind, turn, which, count, f in results:
        if "error" in f:
            print(
                f"| {kind} | {turn + 1} | {NAMES[which]} | {count:,} | failed: {f['error']} | | | |"
            )
            continue
        lags = (
            f"{f['p50_lag_s']:.2f} | {f['p99_lag_s']:.2f} | {f['peak_rss_mib']:.0f}"
            if which != "admin"
            else f"({f['ticks']} ticks) | | "
        )
        incomplete = "" if f.get("complete", True) else f" (stopped after {f['fires']:,})"
        print(
            f"| {kind} | {turn + 1} | {NAMES[which]} | {count:,} | "
            f"{f['fires_per_s']:,.0f}{incomplete} | {lags} |"
        )
    for kind in kinds:
        _ratios(kind, args, [(t, w, n, f) for k, t, w, n, f in results if k == kind])
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
