"""A real server process (gunicorn, ticker on) and Debian's Chromium through Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.conftest import ARTIFACTS

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if requests.get(url + "/api/v1/health", timeout=1).status_code in (200, 503):
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)  # polling a starting process, not waiting for the clock
    raise RuntimeError("server did not start")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`db upgrade`, `admin bootstrap`, then gunicorn with the ticker, as `make run` does."""
    workdir = tmp_path_factory.mktemp("live")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_DATABASE_URL": f"sqlite:///{workdir / 'live.db'}",
        "ALMANAC_SECRET_KEY": "live-test-secret",
        "ALMANAC_ADMIN_PASSWORD": "live-admin-password",
        "ALMANAC_ADMIN_TOKEN": "alm_live_test_token",
        "ALMANAC_SCHEDULER": "on",
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
        _wait_until_up(url, proc)
        yield LiveServer(url, "admin", "live-admin-password", "alm_live_test_token", env)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


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
    yield page
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
