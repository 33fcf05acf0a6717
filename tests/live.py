"""A real Almanac server process (gunicorn) on loopback, on SQLite or a fresh PostgreSQL database.

`db upgrade`, `admin bootstrap`, then gunicorn, as `make run` does; the manual clock is on so
tests move time through `POST /admin/clock`, and the ticker is off so nothing happens between
requests unless a test asks for a tick.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.db import normalize_url

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOKEN = "alm_live_client_token"


@dataclass
class Live:
    url: str
    token: str
    env: dict[str, str]
    backend: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if requests.get(url + "/api/v1/health", timeout=5).status_code in (200, 503):
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)  # polling a starting process, not waiting for the clock
    raise RuntimeError("server did not start")


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database (migrations create the tables), dropped afterwards."""
    admin = create_engine(normalize_url(admin_url), isolation_level="AUTOCOMMIT")
    name = f"almanac_live_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield (
            make_url(normalize_url(admin_url))
            .set(database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def serve(db_url: str, workdir: Path, backend: str, threads: int = 4) -> Iterator[Live]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_DATABASE_URL": db_url,
        "ALMANAC_SECRET_KEY": "live-client-secret",
        "ALMANAC_ADMIN_PASSWORD": "live-admin-password",
        "ALMANAC_ADMIN_TOKEN": TOKEN,
        "ALMANAC_SCHEDULER": "off",
        "ALMANAC_TESTING": "1",
        "ALMANAC_CLOCK": "manual",
    }
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    for command in (["db", "upgrade"], ["admin", "bootstrap"]):
        subprocess.run([*flask, *command], cwd=ROOT, env=env, check=True, capture_output=True)
    with open(workdir / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1"]
            + ["--threads", str(threads), "--graceful-timeout", "2", "--no-control-socket"]
            + ["wsgi:app"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url, proc)
            yield Live(url, TOKEN, env, backend)
        finally:
            # SIGINT is gunicorn's quick shutdown: nothing is in flight once the tests are done.
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=20)
