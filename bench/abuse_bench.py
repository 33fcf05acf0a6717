"""Benchmark: the worst input each role may send, and /health while four of them run at once.

Run: .venv/bin/python bench/abuse_bench.py [--db sqlite|postgres] [--repeat 20] [--seconds 5]

In process through the Flask test client (one process, threads sharing the GIL, as gunicorn's
threaded worker serves them), so "server time" is the time the app spends on the request:

- viewer:   POST /calendar/preview with the largest allowed spec (32 cron expressions of 32-term
            lists, 32 intervals, a DST zone, 100 occurrences);
- operator: POST /schedules saving the largest spec with a 64 KiB input checked against a
            schema full of catastrophic patterns; then the console detail page of that schedule;
- deployer: POST /workflows with 200 pathological `pattern`/`patternProperties` entries.

Then four threads send those requests in a loop while a fifth measures GET /health.
Targets: each request ≤ 50 ms, /health p99 ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app import create_app  # noqa: E402
from app.auth import service as auth_service  # noqa: E402
from app.context import clock, database  # noqa: E402
from app.db import Base, make_engine  # noqa: E402
from tests.conftest import FIXED_NOW  # noqa: E402

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
EVIL = ["^(a+)+$", "^(a|aa)+$", "^(a|a?)+$", "(.*a){20}", "^(\\w+\\s?)*$"]


def largest_spec() -> dict[str, Any]:
    hours = ",".join(str(h) for h in range(24))
    crons = [f"{','.join(str((m + k) % 60) for k in range(32))} {hours} * * *" for m in range(32)]
    intervals = [{"every": f"PT{7 + index}M", "offset": "PT1M"} for index in range(32)]
    return {"cron_expressions": crons, "intervals": intervals, "timezone": "America/New_York"}


def evil_schema(count: int = 5) -> dict[str, Any]:
    props = {f"p{i}": {"type": "string", "pattern": EVIL[i % len(EVIL)]} for i in range(count)}
    return {
        "type": "object",
        "properties": props,
        "patternProperties": {EVIL[i % len(EVIL)] + f"{i}?": {} for i in range(count)},
    }


def make_app(db: str, workdir: Path) -> tuple[Any, Callable[[], None]]:
    if db == "sqlite":
        url = f"sqlite:///{workdir / 'abuse.db'}"
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
    else:
        name = f"almanac_bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)

        def cleanup() -> None:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    config = {"DATABASE_URL": url, "SCHEDULER": "off", "TESTING": True, "CLOCK": "manual"}
    app = create_app(config | {"SECRET_KEY": "bench", "ADMIN_PASSWORD": None})
    with database(app).session() as session:
        clock(app).set(session, FIXED_NOW)  # type: ignore[union-attr]
        session.commit()
    return app, cleanup


def tokens(app: Any) -> dict[str, str]:
    result = {}
    with database(app).session() as session:
        auth_service.create_namespace(session, FIXED_NOW, "default")
        for role in ("viewer", "operator", "deployer"):
            auth_service.create_user(session, FIXED_NOW, role, f"pw-{role}-bench")
            auth_service.grant_role(session, role, "default", role)
            result[role] = auth_service.create_token(session, FIXED_NOW, role, "bench")[1]
        session.commit()
    return result


class Requests:
    """The worst request of each role, each callable again and again."""

    def __init__(self, app: Any, tokens: dict[str, str]) -> None:
        self.app = app
        self.tokens = tokens
        self.counter = 0
        self.spec = largest_spec()
        self.big_input = {f"p{i}": "a" * 13_000 + "!" for i in range(5)}  # ~64 KiB
        client = app.test_client()
        deployed = self._post(
            client,
            "deployer",
            "/workflows",
            {
                "name": "evil",
                "input_schema": evil_schema(),
                "steps": [{"id": "a", "type": "action", "action": "noop"}],
            },
        )
        assert deployed.status_code == 201, deployed.get_json()
        assert (
            self._post(client, "deployer", "/activations", {"workflow": "evil"}).status_code == 201
        )
        self.viewer_page = app.test_client()
        self._sign_in(self.viewer_page, "operator")

    def _post(self, client: Any, role: str, path: str, body: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"}
        return client.post("/api/v1" + path, json=body, headers=headers)

    def _sign_in(self, client: Any, role: str) -> None:
        import re

        page = client.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        client.post(
            "/login", data={"username": role, "password": f"pw-{role}-bench", "csrf_token": token}
        )

    def viewer_preview(self, client: Any) -> int:
        body = {"spec": self.spec, "count": 100}
        return int(self._post(client, "viewer", "/calendar/preview", body).status_code)

    def operator_save(self, client: Any) -> int:
        self.counter += 1
        input_ok = {key: "a" * 13_000 for key in self.big_input}
        body = {
            "id": f"big-{threading.get_ident()}-{self.counter}",
            "spec": self.spec,
            "action": {"workflow": "evil", "input": input_ok},
        }
        return int(self._post(client, "operator", "/schedules", body).status_code)

    def operator_bad_input(self, client: Any) -> int:
        body = {
            "id": "bad",
            "spec": self.spec,
            "action": {"workflow": "evil", "input": self.big_input},
        }
        return int(self._post(client, "operator", "/schedules", body).status_code)

    def operator_detail_page(self, client: Any) -> int:
        return int(self.viewer_page.get("/ns/default/schedules/big-detail").status_code)

    def operator_list_page(self, client: Any) -> int:
        return int(self.viewer_page.get("/ns/default/schedules").status_code)

    def deployer_schema(self, client: Any) -> int:
        self.counter += 1
        schema = evil_schema(200)
        body = {
            "name": f"evil{self.counter}",
            "input_schema": schema,
            "steps": [{"id": "a", "type": "action", "action": "noop"}],
        }
        return int(self._post(client, "deployer", "/workflows", body).status_code)


def timed(fn: Callable[[Any], int], client: Any, repeat: int) -> tuple[list[float], set[int]]:
    times, statuses = [], set()
    for _ in range(repeat):
        started = time.perf_counter()
        statuses.add(fn(client))
        times.append((time.perf_counter() - started) * 1000)
    return times, statuses


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        app, cleanup = make_app(args.db, Path(tmp))
        try:
            run(app, args)
        finally:
            database(app).dispose()
            cleanup()


def run(app: Any, args: argparse.Namespace) -> None:
    requests = Requests(app, tokens(app))
    client = app.test_client()
    body = {"id": "big-detail", "spec": requests.spec, "action": {"workflow": "evil", "input": {}}}
    assert requests._post(client, "operator", "/schedules", body).status_code == 201
    cases = {
        "viewer preview, largest spec, 100 occurrences": requests.viewer_preview,
        "operator save, largest spec + 64 KiB input": requests.operator_save,
        "operator save refused, 64 KiB evil input": requests.operator_bad_input,
        "operator console detail page, largest spec": requests.operator_detail_page,
        "operator console list, 50 largest-spec schedules": requests.operator_list_page,
        "deployer deploy, 200 pathological patterns": requests.deployer_schema,
    }
    print(f"machine: CPython {platform.python_version()}, {platform.machine()}, db={args.db}")
    print(f"{'request':50} {'median':>9} {'p95':>9} {'max':>9}  status")
    for name, fn in cases.items():
        fn(client)  # warm caches once, as a running server would be
        times, statuses = timed(fn, client, args.repeat)
        print(
            f"{name:50} {statistics.median(times):7.1f}ms {percentile(times, 0.95):7.1f}ms "
            f"{max(times):7.1f}ms  {sorted(statuses)}"
        )
    health_under_load(app, requests, args.seconds)


def health_under_load(app: Any, requests: Requests, seconds: float) -> None:
    stop = threading.Event()
    attackers = [
        requests.viewer_preview,
        requests.operator_save,
        requests.operator_bad_input,
        requests.deployer_schema,
    ]
    counts = [0] * len(attackers)

    def attack(index: int) -> None:
        client = app.test_client()
        while not stop.is_set():
            attackers[index](client)
            counts[index] += 1

    threads = [threading.Thread(target=attack, args=(i,)) for i in range(len(attackers))]
    for thread in threads:
        thread.start()
    health = app.test_client()
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        health.get("/api/v1/health")
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(0.01)  # a monitoring probe's pace, not a busy loop
    stop.set()
    for thread in threads:
        thread.join()
    print(
        f"/health with four worst requests looping ({sum(counts)} sent in {seconds:.0f} s): "
        f"n={len(latencies)} median {statistics.median(latencies):.1f}ms "
        f"p99 {percentile(latencies, 0.99):.1f}ms max {max(latencies):.1f}ms (target p99 <= 50 ms)"
    )


if __name__ == "__main__":
    main()
