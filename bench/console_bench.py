"""Benchmark: console page server time with 100,000 schedules, 1,000,000 history events and
1,000,000 runs.

Run: .venv/bin/python bench/console_bench.py [--schedules 100000] [--events 1000000]
     [--runs 1000000] [--backend sqlite|postgres|both] [--repeat 30]

Data goes in through SQLAlchemy Core in bulk (one namespace); on PostgreSQL the database is set
up as in production (`db create-roles`, `db upgrade` as the owner, who loads the data) and the
pages are served as the `almanac_app` login, under row security. The pages are requested
through the app in-process (Flask test client), so the figure is the server's time per request:
routing, session, queries, templates. p50/p95 over `--repeat` requests (and `db p50`, the
median time of the request's SQL statements, sent to answered) of:
- the schedules list (each row with its last 10 runs as squares), first page and a deep page
  (cursor near the end of 100,000),
- one schedule's detail page,
- the history modal's page at the deepest `after_sequence` of the busiest schedule,
- the incidents page (10,000 incidents, half open) and the page of a run of 200 steps in
  four parallel lanes (its steps table and Gantt chart derived from ~400 history events),
- the overview (full page and its htmx refresh): counts by status, overdue and blocked ones,
  runs of the last 24 h per hour by outcome (runs are spread evenly over the last 7 days, so
  about 143,000 fall in the chart's window; read from the runs rollup), open tasks,
- the overview's busiest slots, in their own request (each distinct calendar of the active
  schedules expanded once, as the load page does).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, event, insert, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app import create_app  # noqa: E402
from app.auth import service as auth_service  # noqa: E402
from app.context import clock, database  # noqa: E402
from app.db import (  # noqa: E402
    Base,
    Run,
    Schedule,
    ScheduleHistoryEvent,
    Workflow,
    WorkflowVersion,
    make_engine,
    normalize_url,
    rollup,  # noqa: E402
)
from app.paging import encode_cursor  # noqa: E402
from bench import cockpit_rows  # noqa: E402

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
APP_LOGIN = "almanac_app"
PG_ADMIN = os.environ.get(
    "ALMANAC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
CHUNK = 10_000
RUN_STATUSES = ["completed"] * 14 + ["failed", "cancelled", "running", "waiting", "timed_out"]
WEEK_SECONDS = 7 * 86400
INCIDENTS = 10_000


def schedule_rows(namespace_id: int, user_id: int, count: int) -> Any:
    for i in range(count):
        minute = i % 60
        spec = {
            "cron_expressions": [f"{minute} {i % 24} * * *"],
            "intervals": [],
            "timezone": "UTC",
            "start_at": None,
            "end_at": None,
        }
        yield {
            "uid": str(uuid.UUID(int=i + 1)),
            "namespace_id": namespace_id,
            "schedule_id": f"sched-{i:06d}",
            "revision": 1,
            "status": "active",
            "principal_id": user_id,
            "workflow_name": "report",
            "spec": spec,
            "action": {
                "workflow": "report",
                "activation_id": None,
                "input": {},
                "execution_timeout_seconds": None,
                "run_timeout_seconds": None,
                "queue": None,
            },
            "overlap_policy": "skip",
            "missed_policy": "skip",
            "jitter_seconds": 0,
            "max_runs": None,
            "labels": {"team": f"t{i % 10}"},
            "memo": {},
            "search_attributes": {},
            "notes": None,
            "cursor_at": NOW,
            "next_occurrence": NOW + timedelta(minutes=i % 1440),
            "next_fire_at": NOW + timedelta(minutes=i % 1440),
            "fires_count": 0,
            "skipped_trigger_count": 0,
            "buffered_count": 0,
            "history_sequence": 0,
            "created_at": NOW,
            "updated_at": NOW,
        }


def event_rows(schedule_pks: list[int], per: dict[int, int]) -> Any:
    for pk in schedule_pks:
        for seq in range(1, per[pk] + 1):
            yield {
                "schedule_pk": pk,
                "sequence": seq,
                "event_type": "ScheduleTriggerSkipped",
                "payload": {
                    "reason": "overlap_policy_skip",
                    "skipped_trigger_count": seq,
                    "last_skipped_at": "2026-01-05T12:00:00Z",
                    "command_context": {
                        "actor": None,
                        "source": "scheduler",
                        "request_id": None,
                        "reason": None,
                    },
                },
                "workflow_instance_id": None,
                "workflow_run_id": None,
                "recorded_at": NOW + timedelta(seconds=seq),
            }


def run_rows(namespace_id: int, flow: tuple[int, int], schedules: int, count: int) -> Any:
    """`count` runs, each schedule's in turn, created evenly over the week before NOW."""
    for i in range(count):
        schedule = i % schedules
        yield {
            "uid": str(uuid.UUID(int=(1 << 64) + i)),
            "namespace_id": namespace_id,
            "run_id": f"schedule:sched-{schedule:06d}:{i}",
            "workflow_id": flow[0],
            "workflow_version_id": flow[1],
            "schedule_uid": str(uuid.UUID(int=schedule + 1)),
            "schedule_id": f"sched-{schedule:06d}",
            "status": RUN_STATUSES[i % len(RUN_STATUSES)],
            "input": {},
            "step_index": 1,
            "step_outputs": {},
            "attempt": 1,
            "labels": {},
            "memo": {},
            "search_attributes": {},
            "last_sequence": 3,
            # Older runs first, as ticks would have written them.
            "created_at": NOW - timedelta(seconds=WEEK_SECONDS * (count - i) / count),
        }


def bulk(conn: Any, table: Any, rows: Any) -> None:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            conn.execute(insert(table), batch)
            batch = []
    if batch:
        conn.execute(insert(table), batch)


def migrate(url: str) -> None:
    """The schema as production has it: on PostgreSQL `db create-roles` and `db upgrade` as the
    owner (row security, the logins' grants); SQLite gets the models' tables."""
    if not url.startswith("postgresql"):
        Base.metadata.create_all(make_engine(url))
        return
    env = {**os.environ, "ALMANAC_DATABASE_URL": url, "ALMANAC_SCHEDULER": "off"}
    env["ALMANAC_SECRET_KEY"] = "bench"
    for args in (("db", "create-roles"), ("db", "upgrade")):
        command = [sys.executable, "-m", "flask", "--app", "wsgi", *args]
        subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)


def populate(url: str, schedules: int, events: int, runs: int) -> tuple[str, int]:
    """Fill the database as its owner; return the busiest schedule's id and its last sequence."""
    migrate(url)
    engine = make_engine(url)
    app = create_app({"DATABASE_URL": url, "SCHEDULER": "off", "SECRET_KEY": "bench"})
    with database(app).session() as session:
        user = auth_service.create_user(session, NOW, "bench", "bench-password", superuser=True)
        namespace = auth_service.create_namespace(session, NOW, "default")
        session.commit()
        user_id, namespace_id = user.id, namespace.id
    started = time.perf_counter()
    with engine.begin() as conn:
        bulk(conn, Schedule.__table__, schedule_rows(namespace_id, user_id, schedules))
        pks = [row[0] for row in conn.execute(text("SELECT id FROM schedules ORDER BY id"))]
        # Half the events on one schedule (the deepest history), the rest spread evenly.
        busiest = pks[0]
        per = {pk: 0 for pk in pks}
        per[busiest] = events // 2
        spread = events - per[busiest]
        for index in range(spread):
            per[pks[1 + index % (len(pks) - 1)]] += 1
        bulk(conn, ScheduleHistoryEvent.__table__, event_rows(pks, per))
        conn.execute(text("UPDATE schedules SET history_sequence = 0"))
        flow = conn.execute(
            insert(Workflow).returning(Workflow.id),
            {"namespace_id": namespace_id, "name": "report", "created_at": NOW},
        ).scalar_one()
        definition = {"name": "report", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
        version = conn.execute(
            insert(WorkflowVersion).returning(WorkflowVersion.id),
            {"workflow_id": flow, "version": 1, "definition": definition, "created_at": NOW},
        ).scalar_one()
        bulk(conn, Run.__table__, run_rows(namespace_id, (flow, version), schedules, runs))
        cockpit_rows.load(conn, namespace_id, flow, NOW, INCIDENTS)
        # Runs loaded in bulk bypass the rollup kept at commit: count them once, as the migration
        # that created it does.
        rollup.rebuild(conn)
    if engine.dialect.name == "postgresql":
        # What autovacuum does after a bulk load: statistics, and the visibility map that lets
        # the overview count runs from the index alone.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    else:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    engine.dispose()
    print(
        f"  loaded {schedules:,} schedules, {events:,} events and {runs:,} runs in "
        f"{time.perf_counter() - started:.1f} s"
    )
    return "sched-000000", per[busiest]


# Milliseconds spent in the database's statements (sent to answered) during the current request.
DB_MS = [0.0]


def time_statements(engine: Any) -> None:
    """Add each statement's time to DB_MS: what the database costs of a page, apart from the
    Python around it (on a shared machine both grow; this tells which)."""

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn: Any, *args: Any) -> None:
        conn.info["bench_began"] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn: Any, *args: Any) -> None:
        DB_MS[0] += (time.perf_counter() - conn.info.pop("bench_began")) * 1000


def timed(
    client: Any, path: str, repeat: int, headers: dict[str, str] | None = None
) -> tuple[float, float, float]:
    """p50 and p95 of the request's time, and p50 of its statements' time."""
    samples, in_db = [], []
    for _ in range(repeat):
        DB_MS[0] = 0.0
        began = time.perf_counter()
        response = client.get(path, headers=headers or {})
        samples.append((time.perf_counter() - began) * 1000)
        in_db.append(DB_MS[0])
        assert response.status_code == 200, (path, response.status_code)
    samples.sort()
    p95 = samples[max(0, int(len(samples) * 0.95) - 1)]
    return statistics.median(samples), p95, statistics.median(in_db)


def measure(
    url: str, schedules: int, events: int, runs: int, repeat: int
) -> list[tuple[str, float, float, float]]:
    busiest, last_sequence = populate(url, schedules, events, runs)
    if url.startswith("postgresql"):
        # The pages are served as production serves them: the app login, under row security.
        url = make_url(url).set(username=APP_LOGIN).render_as_string(hide_password=False)
    # The data is laid out around NOW: the pages read the same instant from the manual clock.
    app = create_app(
        {
            "DATABASE_URL": url,
            "SCHEDULER": "off",
            "SECRET_KEY": "bench",
            "WTF_CSRF_ENABLED": False,
            "CLOCK": "manual",
            "TESTING": True,
        }
    )
    with database(app).session() as session:
        clock(app).set(session, NOW)  # type: ignore[union-attr]
        session.commit()
    time_statements(database(app).engine)
    client = app.test_client()
    client.post("/login", data={"username": "bench", "password": "bench-password"})
    first = client.get("/ns/default/schedules").get_data(as_text=True)
    cursor = re.search(r'cursor=([^"&]+)', first)
    assert cursor, "the first page has no next page"
    assert first.count('class="square run-') == 500, "every row shows its last 10 runs"
    steps = client.get(f"/ns/default/runs/{cockpit_rows.STEPS_RUN_ID}").get_data(as_text=True)
    assert steps.count('class="step-bar ') == 200, "the run page draws every step"
    # Walk the keyset to the last pages by building a cursor near the end directly.
    with app.test_request_context():
        deep = encode_cursor("default", "console-schedules", [60])
    rows = [
        ("list, first page", "/ns/default/schedules"),
        ("list, deep page (last 60 of 100k)", f"/ns/default/schedules?cursor={deep}"),
        ("detail", f"/ns/default/schedules/{busiest}"),
        (
            "history, deepest page",
            f"/ns/default/schedules/{busiest}/history?after_sequence={max(0, last_sequence - 100)}",
        ),
        ("history, first page", f"/ns/default/schedules/{busiest}/history"),
        ("overview", "/ns/default/"),
        ("overview, htmx refresh", "/ns/default/"),
        ("incidents, open (5,000)", "/ns/default/incidents"),
        ("incidents, resolved (5,000)", "/ns/default/incidents?status=resolved"),
        ("run detail, 200 steps", f"/ns/default/runs/{cockpit_rows.STEPS_RUN_ID}"),
    ]
    partial = {"HX-Request": "true"}
    results = []
    for label, path in rows:
        headers = partial if "refresh" in label else None
        timed(client, path, 3, headers)  # warm caches and connections
        results.append((label, *timed(client, path, repeat, headers)))
    busiest_slots = "/ns/default/overview/busiest"
    timed(client, busiest_slots, 3, partial)
    results.append(
        ("overview busiest slots (own request)", *timed(client, busiest_slots, repeat, partial))
    )
    database(app).dispose()
    return results


def postgres_url() -> tuple[str, Any]:
    admin = create_engine(normalize_url(PG_ADMIN), isolation_level="AUTOCOMMIT")
    name = f"almanac_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return normalize_url(PG_ADMIN).rsplit("/", 1)[0] + f"/{name}", (admin, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(
        f"console bench: {args.schedules:,} schedules, {args.events:,} history events, "
        f"{args.runs:,} runs; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    table = []
    for backend in backends:
        print(f"[{backend}]")
        if backend == "sqlite":
            folder = tempfile.mkdtemp()
            results = measure(
                f"sqlite:///{folder}/bench.db", args.schedules, args.events, args.runs, args.repeat
            )
        else:
            url, (admin, name) = postgres_url()
            try:
                results = measure(url, args.schedules, args.events, args.runs, args.repeat)
            finally:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        table += [(backend, *row) for row in results]
    print(f"\n{'backend':<9} {'page':<40} {'p50 ms':>8} {'p95 ms':>8} {'db p50':>7}  p95 <= 50")
    for backend, label, p50, p95, in_db in table:
        verdict = "ok" if p95 <= 50 else "OVER"
        print(f"{backend:<9} {label:<40} {p50:>8.1f} {p95:>8.1f} {in_db:>7.1f}  {verdict}")


if __name__ == "__main__":
    main()
