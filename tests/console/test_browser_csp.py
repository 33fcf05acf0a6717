"""The strict Content-Security-Policy breaks nothing: Chromium reports no violation while the
console's htmx features (live preview, partial refresh, history modal) work."""

from __future__ import annotations

import pytest

from tests.console.conftest import sign_in

pytestmark = pytest.mark.browser


def test_console_runs_under_the_policy_without_violations(live_server, live_api, page):
    live_api.deploy("csp-flow", [{"id": "a", "type": "action", "action": "noop"}])
    live_api.post(
        "/schedules", {"id": "csp-check", "cron": "0 * * * *", "action": {"workflow": "csp-flow"}}
    )
    problems: list[str] = []
    page.on(
        "console",
        lambda message: (
            problems.append(message.text)
            if "Content Security Policy" in message.text or "Refused to" in message.text
            else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    sign_in(page, live_server)
    response = page.goto(live_server.url + "/ns/default/schedules")
    assert (
        response is not None
        and "frame-ancestors 'none'" in response.headers["content-security-policy"]
    )
    page.goto(live_server.url + "/ns/default/schedules/new")
    page.get_by_label("Cron expressions").fill("30 2 * * *")
    page.get_by_label("Time zone").fill("America/New_York")
    page.locator("#preview").get_by_text("UTC").first.wait_for()
    page.goto(live_server.url + "/ns/default/schedules/csp-check")
    page.get_by_text("csp-flow").first.wait_for()
    assert problems == []
