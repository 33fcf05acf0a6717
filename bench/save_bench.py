"""Schedule saves through the HTTP API: one client in sequence, then several at once.

Run: .venv/bin/python bench/save_bench.py [--db sqlite|postgres|both] [-n 1000] [--clients 8]
     [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

Each database is set up as in production: SQLite migrated by `db upgrade`; PostgreSQL with
`db create-roles` and `db upgrade` as the owner, then served as `almanac_app` under row-level
security. One gunicorn worker (8 threads, ticker off) serves; clients keep their connection
alive and POST new schedules (`*/5 * * * *`) to /api/v1/schedules.

Clients: `requests` (what most scripts use) and a minimal keep-alive client on the standard
library's http.client. `requests` spends about half a millisecond of its own on each request
on these hosts; the minimal client shows what the server alone allows.

One client saves to three servers in turns of 50 (so a change in this machine's load falls on
all three alike) and prints each rate: Almanac; the floor, bench/floor_app.py on the same
database, which does only the database work a save cannot avoid, the cheapest way this stack
allows (no implementation of a save can beat it on this machine); and the ceiling,
bench/hello_app.py, an endpoint that does nothing. Then 8 clients save to Almanac at once.
"""

from __future__ import annotations

import argparse
import http.client
import json
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
from urllib.parse import urlsplit

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


def _client() -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    return session


class MinimalClient:
    """One keep-alive HTTP/1.1 connection on http.client: the least a client spends a save."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname or "", url.port)
        self.headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def post(self, url: str, body: dict[str, object]) -> tuple[int, bytes]:
        self.connection.request("POST", urlsplit(url).path, json.dumps(body), self.headers)
        response = self.connection.getresponse()
        return response.status, response.read()


def _deploy(base: str) -> None:
    client = _client()
    definition = {"name": "flow", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
    assert client.post(base + "/workflows", json=definition).status_code == 201
    assert client.post(base + "/activations", json={"workflow": "flow"}).status_code == 201


# Saves are timed in rounds of this many per server, the servers taking turns.
ROUND = 50


def _save_many(
    base: str, prefix: str, count: int, client: requests.Session | MinimalClient | None = None
) -> None:
    client = client or _client()
    for index in range(count):
        body = {"id": f"{prefix}{index}", "cron": "*/5 * * * *", "action": {"workflow": "flow"}}
        if isinstance(client, MinimalClient):
            status, text = client.post(base + "/schedules", body)
        else:
            response = client.post(base + "/schedules", json=body)
            status, text = response.status_code, response.content
        assert status == 201, text


def interleaved(bases: dict[str, str], count: int, minimal: bool = False) -> dict[str, float]:
    """Requests/s one client gets from each server, `count` saves each, in turns of `ROUND`
    (the order rotating), so a change in the machine's load falls on every server alike."""
    clients: dict[str, requests.Session | MinimalClient] = {
        name: MinimalClient(base) if minimal else _client() for name, base in bases.items()
    }
    spent = dict.fromkeys(bases, 0.0)
    names = list(bases)
    for turn in range(count // ROUND):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            began = time.perf_counter()
            _save_many(bases[name], f"{name}{turn}-{int(minimal)}-", ROUND, clients[name])
            spent[name] += time.perf_counter() - began
    return {name: (count // ROUND) * ROUND / spent[name] for name in bases}


def concurrent(base: str, count: int, clients: int) -> float:
    """Saves/s in total from `clients` clients saving at once."""
    threads = [
        threading.Thread(target=_save_many, args=(base, f"c{i}-", count // clients))
        for i in range(clients)
    ]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (count // clients) * clients / (time.perf_counter() - began)


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
    print(f"# schedule saves over HTTP, {os.cpu_count()} CPUs, n={args.n}, 1 client unless said")
    bench = {**os.environ, "PYTHONPATH": str(ROOT / "bench")}
    for kind in kinds:
        with (
            database(kind, args.postgres) as env,
            server(env) as almanac,
            _gunicorn("floor_app:app", env | bench) as floor,
            _gunicorn("hello_app:app", bench) as hello,
        ):
            _deploy(almanac)
            bases = {"almanac": almanac, "floor": floor + "/api/v1", "ceiling": hello + "/api/v1"}
            for name, base in bases.items():
                _save_many(base, f"warm-{name}-", 50)
            rates = {"requests": interleaved(bases, args.n)}
            rates["minimal client"] = interleaved(bases, args.n, minimal=True)
            together = concurrent(almanac, args.n, args.clients)
        for client, rate in rates.items():
            saves, least, top = rate["almanac"], rate["floor"], rate["ceiling"]
            print(
                f"{kind}, {client}: Almanac {saves:.0f} saves/s = {saves / least:.0%} of the "
                f"floor app ({least:.0f} saves/s), {saves / top:.0%} of the ceiling "
                f"({top:.0f} requests/s)"
            )
        print(f"{kind}: {args.clients} clients (requests) {together:.0f} saves/s in total")


if __name__ == "__main__":
    main()
