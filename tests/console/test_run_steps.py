"""The run page's steps and Gantt chart for a real parallel run with a branch incident, and the
page as a partial (both databases)."""

from __future__ import annotations

import re

from app.ticker.tick import run_tick
from tests.console.test_pages import csrf_from, sign_in

PARALLEL = {
    "name": "fan",
    "on_step_failure": "incident",
    "steps": [
        {"id": "prepare", "type": "action", "action": "echo", "args": {"rows": 3}},
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
                            "args": {"message": "us down"},
                            "retry": {"max_attempts": 1},
                        }
                    ],
                },
            ],
        },
        {"id": "report", "type": "action", "action": "noop"},
    ],
}


def step_rows(html: str) -> list[tuple[str, str, str]]:
    """(step, branch, status) of each row of the steps table."""
    found = re.findall(
        r'<tr id="step-([^"]+)"[^>]*>.*?data-label="Branch">([^<]*)<.*?'
        r'data-label="Status"><span class="badge [^"]+">([^<]+)<',
        html,
        re.S,
    )
    return [(node, branch, status) for node, branch, status in found]


def bars(html: str) -> list[str]:
    return re.findall(r'class="step-bar (step-[a-z-]+)"', html)


def test_a_parallel_run_shows_its_branches_as_lanes_and_resolves_from_the_page(
    app, client, accounts, api_for
):
    api = api_for("dora", "admin")
    assert api.post("/workflows", json=PARALLEL).status_code == 201
    assert api.post("/activations", json={"workflow": "fan"}).status_code == 201
    assert api.post("/runs", json={"workflow": "fan", "run_id": "fan-1"}).status_code == 201
    for _ in range(3):
        run_tick(app, work=True)
    assert api.get("/runs/fan-1").get_json()["status"] == "suspended"
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    page = client.get("/ns/default/runs/fan-1")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "<svg" in html and " style=" not in html
    assert step_rows(html) == [
        ("prepare", "—", "completed"),
        ("fan-out", "—", "running"),
        ("eu-load", "fan-out/eu", "completed"),
        ("us-load", "fan-out/us", "incident"),
    ]
    assert bars(html) == ["step-completed", "step-running", "step-completed", "step-incident"]
    assert "us down" in html and "&#34;rows&#34;: 3" in html
    incident = api.get("/runs/fan-1/incidents").get_json()["items"][0]
    client.post(
        f"/ns/default/runs/fan-1/incidents/{incident['id']}/resolve",
        data={"csrf_token": csrf_from(page), "action": "skip", "output": '"skipped"'},
    )
    for _ in range(3):
        run_tick(app, work=True)
    assert api.get("/runs/fan-1").get_json()["status"] == "completed"
    done = client.get("/ns/default/runs/fan-1").get_data(as_text=True)
    assert step_rows(done) == [
        ("prepare", "—", "completed"),
        ("fan-out", "—", "completed"),
        ("eu-load", "fan-out/eu", "completed"),
        ("us-load", "fan-out/us", "skipped"),
        ("report", "—", "completed"),
    ]
    # It read "completed" like a step that did its work, nothing saying an operator skipped it.
    us_load = done.split('<tr id="step-us-load"', 1)[1].split("</tr>", 1)[0]
    assert "by olga (incident resolved with Skip)" in us_load
    assert "step-bar step-skipped" in done
    assert "Resolved incidents" in done and "Recovery report" in done


def test_the_run_page_is_a_partial_for_htmx(app, client, accounts, api_for):
    api = api_for("dora", "admin")
    api.post("/workflows", json=PARALLEL)
    api.post("/activations", json={"workflow": "fan"})
    api.post("/runs", json={"workflow": "fan", "run_id": "fan-1"})
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    before = client.get("/ns/default/runs/fan-1").get_data(as_text=True)
    assert "No step has started yet." in before
    run_tick(app, work=True)
    full = client.get("/ns/default/runs/fan-1")
    partial = client.get("/ns/default/runs/fan-1", headers={"HX-Request": "true"})
    assert b"<html" in full.data and b"<html" not in partial.data
    assert b'class="step-bar' in partial.data
    for response in (full, partial):
        assert response.status_code == 200 and "HX-Request" in response.headers["Vary"]
