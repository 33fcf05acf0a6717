"""Sign in through Debian Chromium against a real gunicorn process; the API answers the token."""

from __future__ import annotations

import time

import pytest
import requests
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_bootstrap_admin_signs_in_and_sees_the_overview(live_server, page, artifacts):
    page.goto(live_server.url + "/")
    assert "/login" in page.url
    page.get_by_label("Username").fill(live_server.username)
    page.get_by_label("Password").fill("wrong-password")
    page.get_by_role("button", name="Sign in").click()
    # The click returns once the answer's page is committed, not yet parsed: wait for the text.
    expect(page.get_by_text("Wrong username or password.")).to_be_visible()

    page.get_by_label("Username").fill(live_server.username)
    page.get_by_label("Password").fill(live_server.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ns/default/")
    assert page.get_by_role("heading", name="Overview").is_visible()
    assert page.get_by_label("Namespace").input_value() == "default"
    page.screenshot(path=str(artifacts / "login-schedules-1280.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 800})
    page.screenshot(path=str(artifacts / "login-schedules-390.png"), full_page=True)

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")


def test_token_lists_default_and_ticker_is_alive(live_server):
    headers = {"Authorization": f"Bearer {live_server.token}"}
    response = requests.get(live_server.url + "/api/v1/namespaces", headers=headers, timeout=5)
    assert response.status_code == 200
    assert [n["name"] for n in response.json()["items"]] == ["default"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ticker = requests.get(live_server.url + "/api/v1/health", timeout=5).json()["ticker"]
        if ticker["last_tick_at"]:
            break
        time.sleep(0.2)  # waiting for a real process's first tick, not for a simulated clock
    assert ticker["enabled"] is True and ticker["last_tick_at"] is not None
    assert ticker["lag_seconds"] < 5
