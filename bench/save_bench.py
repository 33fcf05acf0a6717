"""Schedule saves through the HTTP API: one client in sequence, then several at once.

Run: .venv/bin/python bench/save_bench.py [--db sqlite|postgres|both] [-n 1000] [--clients 8]
     [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

Each database is set up as in production: SQLite migrated by `db upgrade`; PostgreSQL with
`db create-roles` and `db upgrade` as the owner, then served as `almanac_app` under row-level
security. One gunicorn worker (8 threads, ticker off) serves; clients keep their connection
alive and POST new schedules (`*/5 * * * *`) to /api/v1/schedules. Prints saves/s, and first
the ceiling of this machine's web stack: the same server and client on an endpoint that does
nothing (bench/hello_app.py), so a figure can be read against the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.db import normalize_url  # noqa: E402

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
TOKEN = "alm_bench_token_for_saves"


def _flask(env: dict[str, str], *args: str) -> None:
    command = [sys.executable, "-m", "flask", "--app", "wsgi", *args]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)


@contextmanager
def database(kind: str, pg_url: str) -> Iterator[dict[str, str]]:
    """A fresh, migrated database; yields the environment the server runs with."""
    base = {**os.environ, "ALMANAC_SCHEDULER": "off", "ALMANAC_SECRET_KEY": "bench"}
    if kind == "sqlite":
        folder = tempfile.mkdtemp(prefix="save-bench-")
        env = base | {"ALMANAC_DATABASE_URL": f"sqlite:///{folder}/bench.db"}
        _flask(env, "db", "upgrade")
        yield env
        return
    admin = create_engine(normalize_url(pg_url), isolation_level="AUTOCOMMIT")
    name = f"save_bench_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    owner = make_url(normalize_url(pg_url)).set(database=name)
    app_url = owner.set(username="almanac_app", password=None)
    env = base | {
        "ALMANAC_MIGRATION_DATABASE_URL": owner.render_as_string(hide_password=False),
        "ALMANAC_DATABASE_URL": app_url.render_as_string(hide_password=False),
    }
    try:
        _flask(env, "db", "create-roles")
        _flask(env, "db", "upgrade")
        yield env
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(env: dict[str, str]) -> Iterator[str]:
    env = env | {"ALMANAC_ADMIN_PASSWORD": "bench-password", "ALMANAC_ADMIN_TOKEN": TOKEN}
    _flask(env, "admin", "bootstrap")
    with _gunicorn("wsgi:app", env) as base:
        yield base + "/api/v1"


@contextmanager
def _gunicorn(app: str, env: dict[str, str]) -> Iterator[str]:
    """`app` served as the saves are: one gunicorn worker with 8 threads."""
    port = _free_port()
    command = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--threads", "8", "--chdir", str(ROOT), app]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                requests.get(base + "/", timeout=10)
                break
            except requests.RequestException:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def ceiling(count: int) -> float:
    """POSTs/s one client gets from a Flask endpoint that does nothing (bench/hello_app.py),
    served and called exactly like the saves: this machine's web stack at its fastest."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "bench")}
    with _gunicorn("hello_app:app", env) as base:
        client = _client()
        body = {"id": "x", "cron": "*/5 * * * *", "action": {"workflow": "flow"}}
        for _ in range(50):
            client.post(base + "/", json=body)
        began = time.perf_counter()
        for _ in range(count):
            assert client.post(base + "/", json=body).status_code == 201
        return count / (time.perf_counter() - began)


def _client() -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    return session


def _deploy(base: str) -> None:
    client = _client()
    definition = {"name": "flow", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
    assert client.post(base + "/workflows", json=definition).status_code == 201
    assert client.post(base + "/activations", json={"workflow": "flow"}).status_code == 201


def _save_many(base: str, prefix: str, count: int) -> None:
    client = _client()
    for index in range(count):
        body = {"id": f"{prefix}{index}", "cron": "*/5 * * * *", "action": {"workflow": "flow"}}
        response = client.post(base + "/schedules", json=body)
        assert response.status_code == 201, response.text


def measure(base: str, count: int, clients: int) -> tuple[float, float]:
    _deploy(base)
    _save_many(base, "warm", 50)
    began = time.perf_counter()
    _save_many(base, "one", count)
    sequential = count / (time.perf_counter() - began)
    threads = [
        threading.Thread(target=_save_many, args=(base, f"c{i}-", count // clients))
        for i in range(clients)
    ]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    concurrent = (count // clients) * clients / (time.perf_counter() - began)
    return sequential, concurrent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--postgres", default=os.environ.get("ALMANAC_TEST_POSTGRES_URL", PG_DEFAULT)
    )
    args = parser.parse_args()
    kinds = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    print(f"# schedule saves over HTTP, {os.cpu_count()} CPUs, n={args.n}")
    top = ceiling(args.n)
    print(f"ceiling: an endpoint that does nothing, 1 client {top:.0f} requests/s")
    for kind in kinds:
        with database(kind, args.postgres) as env, server(env) as base:
            sequential, concurrent = measure(base, args.n, args.clients)
        print(
            f"{kind}: 1 client {sequential:.0f} saves/s ({sequential / top:.0%} of the ceiling); "
            f"{args.clients} clients {concurrent:.0f} saves/s in total"
        )


if __name__ == "__main__":
    main()
