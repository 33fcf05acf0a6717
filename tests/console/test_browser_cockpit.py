"""The cockpit in Debian Chromium: every console page passes axe (no critical or serious
violation) in light and dark themes, with no console error, no CSP violation and no request
leaving the machine; the overview refreshes itself, run squares open their runs, a deploy error
shows inline then succeeds, the time switch sticks, and the keyboard reaches everything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from tests.console.conftest import sign_in

pytestmark = pytest.mark.browser
AXE = (Path(__file__).parents[1] / "support" / "axe-core-4.14.1" / "axe.min.js").read_text()
# Recorded before any page script runs; the browser's own code, so no CSP applies to it.
WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile));
"""
# Parallel branches, one of which fails into an incident.
FAN_OUT = {
    "name": "cockpit-fan",
    "on_step_failure": "incident",
    "steps": [
        {"id": "prepare", "type": "action", "action": "noop"},
        {
            "id": "fan-out",
            "type": "parallel",
            "branches": [
                {"id": "eu", "steps": [{"id": "eu-load", "type": "action", "action": "noop"}]},
                {
                    "id": "us",
                    "steps": [
                        {
                            "id": "us-load",
                            "type": "action",
                            "action": "fail",
                            "args": {"message": "us endpoint down"},
                            "retry": {"max_attempts": 1},
                        }
                    ],
                },
            ],
        },
        {"id": "report", "type": "action", "action": "noop"},
    ],
}
SIZES = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def cockpit(live_api) -> dict[str, str]:
    """Workflows, schedules with runs (one failed), a waiting task; returns ids to visit."""
    live_api.deploy("cockpit-report", [{"id": "build", "type": "action", "action": "noop"}])
    live_api.deploy("cockpit-flaky", [{"id": "upload", "type": "action", "action": "fail"}])
    live_api.deploy(
        "cockpit-review", [{"id": "approve", "type": "task", "title": "Approve the totals"}]
    )
    for name, workflow, zone in (
        ("cockpit-paris", "cockpit-report", "Europe/Paris"),
        ("cockpit-flaky", "cockpit-flaky", "UTC"),
    ):
        live_api.post(
            "/schedules",
            {
                "id": name,
                "cron": "*/5 * * * *",
                "timezone": zone,
                "action": {"workflow": workflow, "input": {}},
                "overlap_policy": "allow_all",
            },
        )
    for minute in ("12:05", "12:10", "12:15"):
        live_api.post(
            "/admin/clock", {"now": f"2026-03-07T{minute}:00Z", "tick": True, "work": True}
        )
    live_api.post("/runs", {"workflow": "cockpit-review", "run_id": "cockpit-review-1"})
    live_api.post("/workflows", FAN_OUT)
    live_api.post("/activations", {"workflow": "cockpit-fan"})
    for run_id in ("cockpit-fan-1", "cockpit-fan-2"):
        live_api.post("/runs", {"workflow": "cockpit-fan", "run_id": run_id})
    for _ in range(3):
        live_api.work()
    runs = live_api.get("/runs?schedule_id=cockpit-paris&limit=10")["items"]
    return {"schedule": "cockpit-paris", "run": runs[0]["run_id"], "fan": "cockpit-fan-1"}


@pytest.fixture
def watched(page, live_server) -> Iterator[dict[str, list[str]]]:
    """The page, with console errors, CSP violations and off-machine requests recorded."""
    seen: dict[str, list[str]] = {"errors": [], "outside": []}
    host = urlparse(live_server.url).netloc
    page.add_init_script(WATCH_CSP)

    def console(msg) -> None:
        if msg.type == "error":
            seen["errors"].append(f"{msg.text} ({msg.location.get('url')})")

    page.on("console", console)
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))

    def outside(request) -> None:
        if urlparse(request.url).netloc not in (host, ""):
            seen["outside"].append(request.url)

    page.on("request", outside)
    yield seen


def axe_violations(page) -> list[str]:
    """Critical and serious axe violations of the current page, as readable lines."""
    page.evaluate(AXE)
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("critical", "serious")
    ]


def check_page(page, seen, artifacts: Path, name: str, shoot: bool) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        problems = axe_violations(page)
        assert problems == [], (name, scheme, problems)
        if shoot:
            for size, viewport in SIZES.items():
                page.set_viewport_size(viewport)
                page.screenshot(
                    path=str(artifacts / f"cockpit-{name}-{scheme}-{size}.png"), full_page=True
                )
            page.set_viewport_size(SIZES["1280"])
    assert page.evaluate("window.__csp") == [], name
    assert seen["errors"] == [], (name, seen["errors"])
    assert seen["outside"] == [], (name, seen["outside"])


def test_every_console_page_passes_axe(live_server, cockpit, page, watched, artifacts):
    ns = live_server.url + "/ns/default"
    page.goto(live_server.url + "/login")
    check_page(page, watched, artifacts, "login", shoot=False)
    sign_in(page, live_server)
    pages = {
        "overview": (f"{ns}/", True),
        "schedules": (f"{ns}/schedules", True),
        "schedule": (f"{ns}/schedules/{cockpit['schedule']}", True),
        "simulation": (f"{ns}/schedules/{cockpit['schedule']}/simulate?horizon=7d&minutes=7", True),
        "new-schedule": (f"{ns}/schedules/new", True),
        "edit-schedule": (f"{ns}/schedules/{cockpit['schedule']}/edit", False),
        "not-found": (f"{ns}/schedules/no-such-schedule", False),
        "history": (f"{ns}/schedules/{cockpit['schedule']}/history", False),
        "workflows": (f"{ns}/workflows", True),
        "runs": (f"{ns}/runs", False),
        "run": (f"{ns}/runs/{cockpit['run']}", False),
        "tasks": (f"{ns}/tasks", False),
        "load": (f"{ns}/load", False),
        "busiest": (f"{ns}/overview/busiest", True),
        "incidents": (f"{ns}/incidents", True),
        "resolved-incidents": (f"{ns}/incidents?status=resolved", False),
        "parallel-run": (f"{ns}/runs/{cockpit['fan']}", True),
    }
    for name, (url, shoot) in pages.items():
        page.goto(url)
        page.wait_for_load_state("networkidle")
        if name == "not-found":
            # The page's own 404 is what this page is about; nothing else may fail.
            assert page.get_by_role("heading").first.is_visible()
            watched["errors"][:] = [e for e in watched["errors"] if f"({url})" not in e]
        check_page(page, watched, artifacts, name, shoot)
    # A form's error summary (it takes focus after a refused submit), in both themes too.
    page.goto(f"{ns}/schedules/new")
    page.get_by_role("button", name="Create schedule").click()
    page.locator(".error-summary").wait_for()
    watched["errors"][:] = [e for e in watched["errors"] if "status of 422" not in e]
    check_page(page, watched, artifacts, "new-schedule-errors", shoot=True)


def test_overview_refreshes_itself(live_server, cockpit, page, watched):
    sign_in(page, live_server)
    assert page.get_by_role("heading", name="Overview").is_visible()
    page.locator("#busiest ol.busiest").wait_for()  # loaded after the page
    with page.expect_response(
        lambda r: "/ns/default/?since=" in r.url and r.request.headers.get("hx-request") == "true",
        timeout=15_000,
    ) as refreshed:
        pass
    assert refreshed.value.status == 200
    assert page.locator("[data-count='active']").inner_text().isdigit()
    flaky = page.locator("section[aria-labelledby='t-runs']")
    assert "failed" in flaky.inner_text()
    assert watched["errors"] == [] and page.evaluate("window.__csp") == []


def test_run_squares_open_their_runs(live_server, live_api, cockpit, page, watched):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules?q=cockpit-paris")
    squares = page.locator("tr[data-schedule='cockpit-paris'] a.square")
    expected = [
        r["run_id"] for r in live_api.get("/runs?schedule_id=cockpit-paris&limit=10")["items"]
    ]
    assert squares.count() == len(expected) == 3
    last = squares.last
    assert last.get_attribute("title").startswith(expected[0])
    last.click()
    page.wait_for_url(f"**/runs/{expected[0]}")
    assert expected[0] in page.locator("h1").inner_text()


def test_deploy_error_inline_then_success(live_server, live_api, page, watched, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/workflows")
    bad = {
        "name": "cockpit-deployed",
        "steps": [{"id": "pause-a-bit", "type": "wait", "duration": "soon"}],
    }
    page.get_by_label("Definition (JSON)").fill(json.dumps(bad))
    page.get_by_role("button", name="Deploy", exact=True).click()
    error = page.locator("#definition-error")
    error.wait_for()
    assert "Step “pause-a-bit”" in error.inner_text() and "steps.0.duration" in error.inner_text()
    page.screenshot(path=str(artifacts / "cockpit-deploy-error-1280.png"), full_page=True)
    assert axe_violations(page) == []
    good = bad | {"steps": [{"id": "pause-a-bit", "type": "wait", "duration": "PT1M"}]}
    page.get_by_label("Definition (JSON)").fill(json.dumps(good))
    page.get_by_role("button", name="Deploy", exact=True).click()
    page.get_by_text("Deployed cockpit-deployed version 1 and activated it.").wait_for()
    ready = live_api.get("/activations?workflow=cockpit-deployed")["items"]
    assert [a["status"] for a in ready] == ["ready"]
    page.locator("#wf-cockpit-deployed").get_by_role("button", name="Retire").click()
    page.get_by_text(f"Retired activation {ready[0]['id']}.").wait_for()
    assert live_api.get("/activations?workflow=cockpit-deployed")["items"][0]["status"] == "retired"


def test_time_switch_sticks(live_server, cockpit, page, watched):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules?q=cockpit-paris")
    row = page.locator("tr[data-schedule='cockpit-paris']")
    assert "UTC" in row.locator("td[data-label='Next due']").inner_text()
    page.get_by_role("button", name="Times: UTC ⇄").click()
    page.wait_for_url("**/schedules?q=cockpit-paris")
    assert "(Europe/Paris)" in row.locator("td[data-label='Next due']").inner_text()
    page.goto(live_server.url + "/ns/default/schedules?q=cockpit-paris")
    assert "(Europe/Paris)" in row.locator("td[data-label='Next due']").inner_text()
    page.get_by_role("button", name="Times: schedule zone ⇄").click()
    page.wait_for_url("**/schedules?q=cockpit-paris")
    assert "(Europe/Paris)" not in row.locator("td[data-label='Next due']").inner_text()


def test_keyboard_reaches_the_page_with_visible_focus(live_server, cockpit, page, watched):
    sign_in(page, live_server)
    # The busiest slots are loaded after the page: the walk below must find them in place.
    page.locator("#busiest ol.busiest").wait_for()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    reached = []
    for _ in range(200):
        page.keyboard.press("Tab")
        tag, text, style, width = page.evaluate(
            "(() => { const el = document.activeElement; const s = getComputedStyle(el);"
            " return [el.tagName, el.textContent.trim().slice(0, 40), s.outlineStyle,"
            " s.outlineWidth]; })()"
        )
        if tag == "BODY":  # past the last control
            break
        assert style != "none" and width != "0px", (text, style, width)
        reached.append(text)
    assert {"Overview", "Schedules", "Workflows", "Runs", "Tasks", "Load"} <= set(reached)
    assert any(text.startswith("Open tasks") for text in reached)
    # The chart's links and the busiest slots (loaded after the page) are reached too.
    assert {"All runs", "see the load chart"} <= set(reached), " | ".join(reached)
    assert any(text.startswith("Times:") for text in reached)


def test_a_branch_incident_is_resolved_from_the_incidents_page(
    live_server, live_api, cockpit, page, watched
):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/incidents")
    card = page.locator("article.incident", has=page.get_by_role("link", name="cockpit-fan-2"))
    assert "us endpoint down" in card.inner_text() and "fan-out/us" in card.inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    card.get_by_label("Skip with output").fill('"skipped by hand"')
    card.get_by_role("button", name="Skip").click()
    page.wait_for_load_state("networkidle")
    assert "Incident resolved (skip)" in page.locator(".flash").inner_text()
    assert page.get_by_role("link", name="cockpit-fan-2").count() == 0
    for _ in range(3):
        live_api.work()
    assert live_api.get("/runs/cockpit-fan-2")["status"] == "completed"
    page.goto(live_server.url + "/ns/default/runs/cockpit-fan-2")
    assert page.locator(".recovery-report").inner_text().startswith("0 held continuations")
    assert page.locator("svg .step-bar").count() == 5
    assert page.evaluate("window.__csp") == [] and watched["errors"] == []


def test_the_simulation_panel_follows_its_inputs(live_server, live_api, cockpit, page, watched):
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/ns/default/schedules/{cockpit['schedule']}")
    started = page.locator("#simulation [data-sim='started']")
    started.wait_for()
    day = int(started.inner_text())
    assert day > 0 and page.locator("#simulation svg .sim-bar").count() == day
    # On a laptop the timeline shows its whole window, not a third of it behind a scroller
    # (it sat in one of the page's three columns).
    scroller = page.locator("#simulation .gantt-scroll")
    sizes = scroller.evaluate("el => [el.clientWidth, el.scrollWidth]")
    assert sizes[0] >= 720 and sizes[1] <= sizes[0], sizes
    with page.expect_response(lambda r: "horizon=7d" in r.url):
        page.get_by_label("Over the next").select_option("7d")
    expect(started).not_to_have_text(str(day))
    assert int(started.inner_text()) > day
    assert page.evaluate("window.__csp") == [] and watched["errors"] == []


def test_a_bad_run_length_replaces_the_results_with_its_reason(live_server, cockpit, page, watched):
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/ns/default/schedules/{cockpit['schedule']}")
    started = page.locator("#simulation [data-sim='started']")
    reason = page.locator("#simulation .field-error")
    started.wait_for()
    minutes = page.get_by_label("if every run took")
    # 1e3 reaches the server; the others the number input's own limits used to stop.
    for bad in ("1e3", "-1", "10081", "1.5"):
        minutes.fill(bad)
        expect(reason).to_contain_text("whole number of minutes from 0 to 10080")
        expect(started).to_have_count(0)
        minutes.fill("5")
        started.wait_for()
        expect(reason).to_have_count(0)
    assert page.evaluate("window.__csp") == []
    assert [e for e in watched["errors"] if "422" not in e] == []


def test_the_form_simulates_as_it_changes(live_server, cockpit, page, watched):
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/ns/default/schedules/new")
    page.get_by_label("Cron expressions").fill("*/5 * * * *")
    page.get_by_label("Workflow", exact=False).first.fill("cockpit-report")
    started = page.locator("#form-simulation [data-sim='started']")
    started.wait_for()
    page.wait_for_load_state("networkidle")
    every_run = int(started.inner_text())
    assert every_run > 0
    page.get_by_label("if every run took").fill("12")
    expect(page.locator("#form-simulation [data-sim='skipped']")).not_to_have_text("0")
    assert int(started.inner_text()) < every_run
    assert page.evaluate("window.__csp") == [] and watched["errors"] == []
