"""A real server process (gunicorn, ticker on) and Debian's Chromium through Playwright."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.conftest import ARTIFACTS
from tests.live import free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


@dataclass
class LiveServer:
    url: str
    username: str
    password: str
    token: str
    env: dict[str, str]


@contextmanager
def serve(workdir: Path) -> Iterator[LiveServer]:
    """`db upgrade`, `admin bootstrap`, then gunicorn with the ticker, as `make run` does, on a
    new SQLite file in `workdir`; stopped on exit."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_DATABASE_URL": f"sqlite:///{workdir / 'live.db'}",
        "ALMANAC_SECRET_KEY": "live-test-secret",
        "ALMANAC_ADMIN_PASSWORD": "live-admin-password",
        "ALMANAC_ADMIN_TOKEN": "alm_live_test_token",
        "ALMANAC_SCHEDULER": "on",
        # Deterministic: the test moves the shared manual clock through the API.
        "ALMANAC_TESTING": "1",
        "ALMANAC_CLOCK": "manual",
    }
    flask = [str(BIN / "flask"), "--app", "wsgi"]
    subprocess.run([*flask, "db", "upgrade"], cwd=ROOT, env=env, check=True, capture_output=True)
    subprocess.run(
        [*flask, "admin", "bootstrap"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "4",
            "wsgi:app",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, proc)
        yield LiveServer(url, "admin", "live-admin-password", "alm_live_test_token", env)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server shared by the session's browser tests."""
    with serve(tmp_path_factory.mktemp("live")) as server:
        yield server


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        if os.environ.get("ALMANAC_REQUIRE_BROWSER") in {"1", "true"}:
            pytest.fail(f"the browser is required but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.set_default_timeout(15_000)
    yield page
    context.close()


class LiveApi:
    """The live server's JSON API with the bootstrap admin's token."""

    def __init__(self, server: LiveServer) -> None:
        self.base = server.url + "/api/v1"
        self.headers = {"Authorization": f"Bearer {server.token}"}

    def call(
        self, method: str, path: str, json: object = None, **headers: str
    ) -> requests.Response:
        response = requests.request(
            method, self.base + path, json=json, timeout=30, headers=self.headers | headers
        )
        assert response.status_code < 400, (path, response.status_code, response.text[:500])
        return response

    def post(self, path: str, json: object = None, **headers: str) -> dict:  # type: ignore[type-arg]
        return self.call("POST", path, json if json is not None else {}, **headers).json()

    def get(self, path: str) -> dict:  # type: ignore[type-arg]
        return self.call("GET", path).json()

    def deploy(self, name: str, steps: list[dict[str, object]]) -> str:
        self.post("/workflows", {"name": name, "input_schema": {"type": "object"}, "steps": steps})
        return str(self.post("/activations", {"workflow": name})["id"])

    def work(self) -> dict:  # type: ignore[type-arg]
        return self.post("/admin/tick", {"work": True})


@pytest.fixture(scope="session")
def live_api(live_server: LiveServer) -> LiveApi:
    api = LiveApi(live_server)
    api.post("/admin/clock", {"now": "2026-03-07T12:00:00Z"})
    return api


def sign_in(page: object, server: LiveServer) -> None:
    page.goto(server.url + "/login")  # type: ignore[attr-defined]
    page.get_by_label("Username").fill(server.username)  # type: ignore[attr-defined]
    page.get_by_label("Password").fill(server.password)  # type: ignore[attr-defined]
    page.get_by_role("button", name="Sign in").click()  # type: ignore[attr-defined]
    page.wait_for_url("**/ns/default/")  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def seed_workflow(
    app: object,
    name: str = "invoice-sync",
    namespace: str = "default",
    steps: list[dict[str, object]] | None = None,
) -> str:
    """Insert a workflow, version 1 and a ready activation; return the activation id."""
    from sqlalchemy import select

    from app.context import database
    from app.db import Activation, Namespace, Workflow, WorkflowVersion
    from tests.conftest import FIXED_NOW

    with database(app).session() as session:  # type: ignore[arg-type]
        ns = session.scalar(select(Namespace).where(Namespace.name == namespace))
        flow = Workflow(namespace_id=ns.id, name=name, created_at=FIXED_NOW)
        session.add(flow)
        session.flush()
        definition = {
            "name": name,
            "input_schema": {"type": "object"},
            "steps": steps or [{"id": "a", "type": "action", "action": "noop"}],
        }
        version = WorkflowVersion(
            workflow_id=flow.id, version=1, definition=definition, created_at=FIXED_NOW
        )
        session.add(version)
        session.flush()
        activation = Activation(
            namespace_id=ns.id,
            workflow_id=flow.id,
            workflow_version_id=version.id,
            status="ready",
            created_at=FIXED_NOW,
        )
        session.add(activation)
        session.commit()
        return activation.id


@pytest.fixture
def olga(app, client, accounts):
    """An operator of `default`, signed in to the console, with the `invoice-sync` workflow."""
    from tests.console.test_pages import sign_in

    account = accounts.create("olga", role="operator")
    seed_workflow(app)
    sign_in(client, "olga", account.password)
    return account
