"""A long run's history in Chromium: the page shows the first 50 events and Load more appends
the rest in place, with no console error and no CSP violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.console.conftest import sign_in
from tests.console.test_browser_cockpit import watched  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser
STEPS = [{"id": f"load-{n:02d}", "type": "action", "action": "noop"} for n in range(40)]


def test_load_more_appends_the_rest_of_the_history(live_server, live_api, page, watched, artifacts):  # noqa: E501, F811
    live_api.deploy("history-long", STEPS)
    live_api.post("/runs", {"workflow": "history-long", "run_id": "history-long-1"})
    for _ in range(60):
        live_api.work()
        if live_api.get("/runs/history-long-1")["status"] == "completed":
            break
    total = len(live_api.get("/runs/history-long-1/history?limit=100")["items"])
    assert 50 < total < 100
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/runs/history-long-1")
    events = page.locator("#run-history > li")
    expect(events).to_have_count(50)
    expect(page.locator(".step-bar")).to_have_count(40)
    more = page.get_by_role("link", name="Load more")
    more.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "cockpit-run-history-more-1280.png"))
    more.click()
    expect(events).to_have_count(total)
    expect(page.get_by_role("link", name="Load more")).to_have_count(0)
    assert page.url.endswith("/ns/default/runs/history-long-1"), "appended in place"
    page.screenshot(path=str(artifacts / "cockpit-run-history-1280.png"), full_page=True)
    assert page.evaluate("window.__csp") == []
    assert watched["errors"] == [] and watched["outside"] == []


def test_a_load_more_that_fails_says_so_until_a_request_succeeds(
    live_server, live_api, page, artifacts
):
    # A failed htmx request used to change nothing on the page: no message, no retry.
    live_api.deploy("history-flaky", STEPS)
    live_api.post("/runs", {"workflow": "history-flaky", "run_id": "history-flaky-1"})
    for _ in range(60):
        live_api.work()
        if live_api.get("/runs/history-flaky-1")["status"] == "completed":
            break
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/runs/history-flaky-1")
    events = page.locator("#run-history > li")
    expect(events).to_have_count(50)
    page.route("**/history-flaky-1/history**", lambda route: route.abort())
    page.get_by_role("link", name="Load more").click()
    notice = page.locator("#request-failed")
    expect(notice).to_contain_text("could not reach the server")
    expect(notice).to_contain_text("may be out of date")
    page.screenshot(path=str(artifacts / "cockpit-request-failed-1280.png"))
    expect(events).to_have_count(50)
    page.unroute("**/history-flaky-1/history**")
    page.get_by_role("link", name="Load more").click()
    expect(events).not_to_have_count(50)
    expect(notice).to_have_count(0)
