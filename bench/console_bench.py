"""Benchmark: console page server time with 100,000 schedules and 1,000,000 history events.

Run: .venv/bin/python bench/console_bench.py [--schedules 100000] [--events 1000000]
     [--backend sqlite|postgres|both] [--repeat 30]

Data goes in through SQLAlchemy Core in bulk (one namespace); the pages are then requested
through the app in-process (Flask test client), so the figure is the server's time per request:
routing, session, queries, templates. p50/p95 over `--repeat` requests of:
- the schedules list, first page and a deep page (cursor near the end of 100,000),
- one schedule's detail page,
- the history modal's page at the deepest `after_sequence` of the busiest schedule.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, insert, text  # noqa: E402

from app import create_app  # noqa: E402
from app.auth import service as auth_service  # noqa: E402
from app.context import database  # noqa: E402
from app.db import Base, Schedule, ScheduleHistoryEvent, make_engine, normalize_url  # noqa: E402

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PG_ADMIN = os.environ.get(
    "ALMANAC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
CHUNK = 10_000


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


def bulk(conn: Any, table: Any, rows: Any) -> None:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            conn.execute(insert(table), batch)
            batch = []
    if batch:
        conn.execute(insert(table), batch)


def populate(url: str, schedules: int, events: int) -> tuple[str, int]:
    """Fill the database; return the busiest schedule's id and its last sequence."""
    engine = make_engine(url)
    Base.metadata.create_all(engine)
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
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))
    else:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    engine.dispose()
    print(
        f"  loaded {schedules:,} schedules and {events:,} events in "
        f"{time.perf_counter() - started:.1f} s"
    )
    return "sched-000000", per[busiest]


def timed(client: Any, path: str, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def measure(url: str, schedules: int, events: int, repeat: int) -> list[tuple[str, float, float]]:
    busiest, last_sequence = populate(url, schedules, events)
    app = create_app(
        {"DATABASE_URL": url, "SCHEDULER": "off", "SECRET_KEY": "bench", "WTF_CSRF_ENABLED": False}
    )
    client = app.test_client()
    client.post("/login", data={"username": "bench", "password": "bench-password"})
    first = client.get("/ns/default/schedules").get_data(as_text=True)
    cursor = re.search(r'cursor=([^"&]+)', first)
    assert cursor, "the first page has no next page"
    # Walk the keyset to the last pages by building a cursor near the end directly.
    from app.paging import encode_cursor

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
    ]
    results = []
    for label, path in rows:
        timed(client, path, 3)  # warm caches and connections
        p50, p95 = timed(client, path, repeat)
        results.append((label, p50, p95))
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
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(
        f"console bench: {args.schedules:,} schedules, {args.events:,} history events; "
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
                f"sqlite:///{folder}/bench.db", args.schedules, args.events, args.repeat
            )
        else:
            url, (admin, name) = postgres_url()
            try:
                results = measure(url, args.schedules, args.events, args.repeat)
            finally:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        table += [(backend, *row) for row in results]
    print(f"\n{'backend':<9} {'page':<36} {'p50 ms':>8} {'p95 ms':>8}  target p95 <= 100")
    for backend, label, p50, p95 in table:
        verdict = "ok" if p95 <= 100 else "OVER"
        print(f"{backend:<9} {label:<36} {p50:>8.1f} {p95:>8.1f}  {verdict}")


if __name__ == "__main__":
    main()
