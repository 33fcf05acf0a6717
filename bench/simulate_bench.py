"""Benchmark: simulations of 1,000 occurrences, pure and through the API (target p95 <= 50 ms).

Run: .venv/bin/python bench/simulate_bench.py [--repeat 50] [--backend sqlite|postgres|both]

Pure: `app.schedules.simulate.simulate` on scenarios that each decide 1,000 occurrences (the
cap; every one of them is truncated at 1,000). API: the same scenarios requested in-process
through the Flask test client (routing, token, parsing, the save checks, loading the stored
schedule, the simulation and the JSON), on a temporary SQLite file and a fresh PostgreSQL
database. p50/p95 over `--repeat` runs after 3 warm-up runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app import create_app  # noqa: E402
from app.auth import service as auth_service  # noqa: E402
from app.calendar import Spec, parse_duration  # noqa: E402
from app.context import database  # noqa: E402
from app.db import (  # noqa: E402
    Activation,
    Base,
    Namespace,
    Workflow,
    WorkflowVersion,
    make_engine,
    normalize_url,
)
from app.schedules import service  # noqa: E402
from app.schedules.audit import CommandContext  # noqa: E402
from app.schedules.simulate import Start, simulate  # noqa: E402

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=60)
PG_ADMIN = os.environ.get(
    "ALMANAC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# name -> (save-body fields, run_duration); each decides at least 1,000 occurrences in 30 days.
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "every minute, skip, 25-min runs": ({"cron": "* * * * *", "overlap_policy": "skip"}, "PT25M"),
    "every minute, buffer_all, 90-s runs": (
        {"cron": "* * * * *", "overlap_policy": "buffer_all"},
        "PT90S",
    ),
    "*/5 jitter 120 s, allow_all, 1-h runs": (
        {"cron": "*/5 * * * *", "overlap_policy": "allow_all", "jitter_seconds": 120},
        "PT1H",
    ),
    "cron + interval, New York, terminate_other": (
        {
            "spec": {
                "cron_expressions": ["*/10 * * * *"],
                "intervals": [{"every": "PT7M"}],
                "timezone": "America/New_York",
            },
            "overlap_policy": "terminate_other",
        },
        "PT12M",
    ),
}
WINDOW = {"from": "2026-01-05T12:00:30Z", "to": "2026-02-04T12:00:00Z"}


Row = tuple[str, str, float, float, float]


def percentiles(run: Callable[[], None], repeat: int) -> tuple[float, float, float]:
    """Wall-clock p50 and p95, and the p95 of this process's CPU time, in ms."""
    for _ in range(3):
        run()
    wall, cpu = [], []
    for _ in range(repeat):
        began, began_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
    wall.sort()
    cpu.sort()
    at = max(0, int(repeat * 0.95) - 1)
    return statistics.median(wall), wall[at], cpu[at]


def pure_start(fields: dict[str, Any]) -> Start:
    spec = fields.get("spec") or {"cron_expressions": [fields["cron"]], "timezone": "UTC"}
    return Start(
        schedule_id="bench",
        uid=str(uuid.UUID(int=7)),
        spec=Spec.from_dict(spec),
        cursor=datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC) - timedelta(microseconds=1),
        overlap_policy=fields.get("overlap_policy", "skip"),
        jitter_seconds=fields.get("jitter_seconds", 0),
    )


def measure_pure(repeat: int) -> list[Row]:
    rows = []
    begin = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)
    window = (begin, begin + timedelta(days=30))
    for name, (fields, duration) in SCENARIOS.items():
        start = pure_start(fields)
        length = parse_duration(duration)
        result = simulate(start, window, length, GRACE)
        assert len(result.items) == 1000 and result.truncated, name
        figures = percentiles(lambda s=start, d=length: simulate(s, window, d, GRACE), repeat)
        rows.append(("pure", name, *figures))
    return rows


def prepare(url: str) -> tuple[Any, str, str]:
    """A database with one user (token), a workflow, a ready activation and stored schedules."""
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    app = create_app(
        {"DATABASE_URL": url, "SCHEDULER": "off", "SECRET_KEY": "bench", "TESTING": True}
    )
    with database(app).session() as session:
        user = auth_service.create_user(session, NOW, "bench", "bench-password", superuser=True)
        namespace = auth_service.create_namespace(session, NOW, "default")
        _, token = auth_service.create_token(session, NOW, "bench", "bench")
        activation = _activation(session, namespace)
        session.commit()
        for index, (fields, _) in enumerate(SCENARIOS.values()):
            body = {"id": f"s{index}", "activation_id": activation, "input": {}} | fields
            service.save(session, NOW, namespace, user, CommandContext("bench", "api"), body, None)
            session.commit()
    return app, token, activation


def _activation(session: Any, namespace: Namespace) -> str:
    flow = Workflow(namespace_id=namespace.id, name="report", created_at=NOW)
    session.add(flow)
    session.flush()
    definition = {
        "name": "report",
        "input_schema": {"type": "object"},
        "steps": [{"id": "a", "type": "action", "action": "noop"}],
    }
    version = WorkflowVersion(workflow_id=flow.id, version=1, definition=definition, created_at=NOW)
    session.add(version)
    session.flush()
    activation = Activation(
        namespace_id=namespace.id,
        workflow_id=flow.id,
        workflow_version_id=version.id,
        status="ready",
        created_at=NOW,
    )
    session.add(activation)
    session.flush()
    return str(activation.id)


def measure_api(backend: str, url: str, repeat: int) -> list[Row]:
    app, token, activation = prepare(url)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    rows = []
    for index, (name, (fields, duration)) in enumerate(SCENARIOS.items()):
        window = WINDOW | {"run_duration": duration}
        body = {"activation_id": activation, "input": {}} | fields | window

        def post(path: str, payload: dict[str, Any]) -> None:
            response = client.post(f"/api/v1{path}", json=payload, headers=headers)
            assert response.status_code == 200, response.get_json()
            assert len(response.get_json()["items"]) == 1000

        figures = percentiles(lambda b=body: post("/schedules/simulate", b), repeat)
        rows.append((f"{backend} body", name, *figures))
        stored = f"/schedules/s{index}/simulate"
        figures = percentiles(lambda p=stored, w=window: post(p, w), repeat)
        rows.append((f"{backend} stored", name, *figures))
    database(app).dispose()
    return rows


def with_postgres(repeat: int) -> list[Row]:
    admin_url = normalize_url(PG_ADMIN)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"almanac_bench_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        return measure_api("postgres", url, repeat)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    print(
        f"simulate bench: 1,000 occurrences per simulation; {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    rows = measure_pure(args.repeat)
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as folder:
            rows += measure_api("sqlite", f"sqlite:///{folder}/bench.db", args.repeat)
    if args.backend in ("postgres", "both"):
        rows += with_postgres(args.repeat)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    header = f"{'path':<16} {'scenario':<44} {'p50 ms':>7} {'p95 ms':>7} {'cpu p95':>8}"
    print(f"\n{header}  target p95 <= 50")
    for path, name, p50, p95, cpu in rows:
        verdict = "ok" if p95 <= 50 else "OVER"
        print(f"{path:<16} {name:<44} {p50:7.1f} {p95:7.1f} {cpu:8.1f}  {verdict}")


if __name__ == "__main__":
    main()
