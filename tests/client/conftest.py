"""One live server per database for the whole client test package, and helpers to drive it."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from almanac import Client
from almanac.cli import cli
from tests.conftest import PG_URL
from tests.live import ROOT, Live, postgres_database, serve

NOOP = {
    "name": "noop-flow",
    "input_schema": {"type": "object"},
    "steps": [{"id": "a", "type": "action", "action": "noop"}],
}


@pytest.fixture(scope="session", autouse=True)
def this_checkouts_command() -> Iterator[None]:
    """Child processes (the installed `almanac` command) import this checkout's package.

    The venv's editable install may point at another checkout; PYTHONPATH comes first.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        )
        yield


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    with served(request, tmp_path_factory, "client") as server:
        yield server


@contextmanager
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[Live]:
    """A live server on the database `request.param` names (sqlite or postgres), its files in
    a fresh folder called after `name`."""
    workdir = tmp_path_factory.mktemp(f"{name}-{request.param}")
    if request.param == "sqlite":
        with serve(f"sqlite:///{workdir / f'{name}.db'}", workdir, "sqlite") as server:
            yield server
        return
    request.getfixturevalue("postgres_url")  # skips (or fails when required) without PostgreSQL
    with postgres_database(PG_URL) as url, serve(url, workdir, "postgres") as server:
        yield server


def run_cli(url: str, tmp_path: Path, *args: str, input: str | bytes | None = None) -> Result:
    """The `almanac` command against `url` with token `t`, no profile of the machine's."""
    env = {
        "ALMANAC_URL": url,
        "ALMANAC_TOKEN": "t",
        "ALMANAC_NAMESPACE": None,
        "ALMANAC_PROFILE": None,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return CliRunner().invoke(cli, list(args), input=input, env=env, catch_exceptions=False)


@pytest.fixture
def namespace(live: Live) -> str:
    """A fresh namespace per test, with a deployed, activated no-op workflow."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    with Client(live.url, live.token, name) as client:
        client.create_namespace(name)
        client.deploy_workflow(NOOP)
        client.create_activation("noop-flow")
    return name


@pytest.fixture
def sdk(live: Live, namespace: str) -> Iterator[Client]:
    with Client(live.url, live.token, namespace) as client:
        yield client


class Almanac:
    """Runs the `almanac` command in-process against the live server."""

    def __init__(self, live: Live, namespace: str, config_home: Path) -> None:
        self.env = {
            "ALMANAC_URL": live.url,
            "ALMANAC_TOKEN": live.token,
            "ALMANAC_NAMESPACE": namespace,
            "ALMANAC_PROFILE": None,
            "XDG_CONFIG_HOME": str(config_home),
            "COLUMNS": "80",
        }

    def __call__(self, *args: str, input: str | None = None, **env: Any) -> Result:
        runner = CliRunner()
        return runner.invoke(
            cli, list(args), input=input, env=self.env | env, catch_exceptions=False
        )


@pytest.fixture
def almanac(live: Live, namespace: str, tmp_path: Path) -> Almanac:
    return Almanac(live, namespace, tmp_path / "config")


def schedule_body(schedule_id: str, cron: str = "0 * * * *", **extra: Any) -> dict[str, Any]:
    return {"schedule_id": schedule_id, "cron": cron, "action": {"workflow": "noop-flow"}} | extra


class JsonHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: `send_json` answers, and nothing is logged."""

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local server answering with `handler`, in a thread; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
