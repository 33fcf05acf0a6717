"""The namespace's incidents page: open and resolved lists, paging, the partial, and controls
for run.manage only (both databases)."""

from __future__ import annotations

import re

import pytest

from app.console import incidents as page_module
from app.ticker.tick import run_tick
from tests.console.test_pages import csrf_from, sign_in
from tests.support.in_flight import incident_beside_an_in_flight_action

DEFINITION = {
    "name": "stuck",
    "on_step_failure": "incident",
    "steps": [
        {"id": "charge", "type": "action", "action": "fail", "args": {"message": "declined"}},
        {"id": "after", "type": "action", "action": "echo", "args": "after"},
    ],
}


def operator_at(client, accounts, api, path: str):
    """An operator signed in on `path`, and the open incident of the suspended `stuck-1`."""
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    incident = api.get("/runs/stuck-1/incidents").get_json()["items"][0]
    return client.get(path), incident


def suspend(api_for, app, *run_ids: str):
    api = api_for("dora", "admin")
    assert api.post("/workflows", json=DEFINITION).status_code == 201
    assert api.post("/activations", json={"workflow": "stuck"}).status_code == 201
    for run_id in run_ids:
        assert api.post("/runs", json={"workflow": "stuck", "run_id": run_id}).status_code == 201
    run_tick(app, work=True)
    return api


def listed_runs(html: str) -> list[str]:
    return re.findall(r'href="/ns/default/runs/([^"]+)">', html)


def test_open_incidents_are_listed_and_resolved_from_the_page(app, client, accounts, api_for):
    api = suspend(api_for, app, "stuck-1", "stuck-2")
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    page = client.get("/ns/default/incidents")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert sorted(listed_runs(html)) == ["stuck-1", "stuck-2"]
    assert "declined" in html and "<code>charge</code>" in html
    assert html.count("Retry</button>") == 2 and 'href="/ns/default/incidents"' in html
    incident = api.get("/runs/stuck-1/incidents").get_json()["items"][0]
    done = client.post(
        f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve",
        data={
            "csrf_token": csrf_from(page),
            "action": "skip",
            "back": "/ns/default/incidents?status=open",
        },
    )
    assert done.status_code == 302
    assert done.headers["Location"] == "/ns/default/incidents?status=open"
    assert api.get("/runs/stuck-1").get_json()["status"] == "running"
    still_open = client.get("/ns/default/incidents").get_data(as_text=True)
    assert listed_runs(still_open) == ["stuck-2"] and "Incident resolved (skip)" in still_open
    resolved = client.get("/ns/default/incidents?status=resolved").get_data(as_text=True)
    assert listed_runs(resolved) == ["stuck-1"]
    assert "Retry</button>" not in resolved and "<strong>skip</strong>" in resolved
    assert "0 held continuations released, 0 elapsed waits, 0 timeouts" in resolved


def test_an_outside_back_target_goes_home(app, client, accounts, api_for):
    api = suspend(api_for, app, "stuck-1")
    page, incident = operator_at(client, accounts, api, "/ns/default/incidents")
    done = client.post(
        f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve",
        data={"csrf_token": csrf_from(page), "action": "fail", "back": "//evil.example/"},
    )
    assert done.headers["Location"] == "/"
    assert api.get("/runs/stuck-1").get_json()["status"] == "failed"


@pytest.mark.parametrize("back", ["/.//evil.example", "/./\\evil", "/a/../..//evil"])
def test_a_back_target_with_dot_segments_goes_home(app, client, accounts, api_for, back):
    api = suspend(api_for, app, "stuck-1")
    page, incident = operator_at(client, accounts, api, "/ns/default/incidents")
    done = client.post(
        f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve",
        data={"csrf_token": csrf_from(page), "action": "fail", "back": back},
    )
    assert (done.status_code, done.headers["Location"]) == (302, "/")


def test_a_viewer_sees_incidents_without_controls(app, client, accounts, api_for):
    suspend(api_for, app, "stuck-1")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    html = client.get("/ns/default/incidents").get_data(as_text=True)
    assert listed_runs(html) == ["stuck-1"]
    assert "Retry</button>" not in html and "Fail</button>" not in html
    assert 'name="action"' not in html


def test_pages_of_incidents_follow_a_signed_cursor(app, client, accounts, api_for, monkeypatch):
    monkeypatch.setattr(page_module, "PAGE_SIZE", 2)
    suspend(api_for, app, "stuck-1", "stuck-2", "stuck-3")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    first = client.get("/ns/default/incidents").get_data(as_text=True)
    cursor = re.search(r'href="(/ns/default/incidents\?status=open&amp;cursor=[^"]+)"', first)
    assert cursor, "a next-page link"
    second = client.get(cursor.group(1).replace("&amp;", "&")).get_data(as_text=True)
    seen = listed_runs(first) + listed_runs(second)
    assert sorted(seen) == ["stuck-1", "stuck-2", "stuck-3"] and len(set(seen)) == 3
    assert client.get("/ns/default/incidents?cursor=forged").status_code == 400
    # The open tab's cursor on the resolved tab: the message every list gives for it.
    token = re.search(r"cursor=([^&\"]+)", cursor.group(1).replace("&amp;", "&")).group(1)
    other = client.get(f"/ns/default/incidents?status=resolved&cursor={token}")
    assert other.status_code == 400
    assert "other filters" in other.get_data(as_text=True)


def test_the_list_is_a_partial_for_htmx_and_a_page_without(app, client, accounts, api_for):
    suspend(api_for, app, "stuck-1")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    full = client.get("/ns/default/incidents")
    partial = client.get("/ns/default/incidents", headers={"HX-Request": "true"})
    assert b"<html" in full.data and b"<html" not in partial.data
    assert b"stuck-1" in partial.data
    for response in (full, partial):
        assert response.status_code == 200 and "HX-Request" in response.headers["Vary"]


def test_the_run_page_shows_the_recovery_report_after_resolving(app, client, accounts, api_for):
    api = suspend(api_for, app, "stuck-1")
    page, incident = operator_at(client, accounts, api, "/ns/default/runs/stuck-1")
    client.post(
        f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve",
        data={"csrf_token": csrf_from(page), "action": "retry"},
    )
    html = client.get("/ns/default/runs/stuck-1").get_data(as_text=True)
    assert "Open incidents" not in html and "Resolved incidents" in html
    assert re.search(r'class="recovery-report">0 held continuations released', html)


def test_a_refused_resolve_goes_back_to_the_incidents_page(app, client, accounts, api_for):
    api = suspend(api_for, app, "stuck-1")
    page, incident = operator_at(client, accounts, api, "/ns/default/incidents")
    url = f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve"
    token = csrf_from(page)
    refused = client.post(
        url,
        data={
            "csrf_token": token,
            "action": "skip",
            "output": "{nope",
            "back": "/ns/default/incidents",
        },
    )
    assert refused.status_code == 302
    assert refused.headers["Location"] == "/ns/default/incidents"
    back = client.get("/ns/default/incidents").get_data(as_text=True)
    assert "not valid JSON" in back and listed_runs(back) == ["stuck-1"]
    assert api.get("/runs/stuck-1/incidents").get_json()["items"][0]["resolved_at"] is None
    outside = client.post(
        url,
        data={"csrf_token": token, "action": "skip", "output": "{nope", "back": "//evil.example/"},
    )
    assert outside.headers["Location"] == "/"


def test_a_run_being_cancelled_offers_no_resolution(app, client, accounts, api_for):
    """Once a cancel was asked for, the run's end resolves its incidents: the page says so and
    offers no Retry, Skip or Fail (each would be refused)."""
    api = api_for("dora", "admin")
    echo = {"id": "x-1", "type": "action", "action": "echo", "args": "x"}
    fail = {"id": "charge", "type": "action", "action": "fail", "args": {"message": "declined"}}
    branches = [{"id": "x", "steps": [echo]}, {"id": "pay", "steps": [fail]}]
    definition = {
        "name": "busy",
        "on_step_failure": "incident",
        "steps": [{"id": "fan", "type": "parallel", "branches": branches}],
    }
    assert api.post("/workflows", json=definition).status_code == 201
    assert api.post("/activations", json={"workflow": "busy"}).status_code == 201
    assert api.post("/runs", json={"workflow": "busy", "run_id": "busy-1"}).status_code == 201
    incident_beside_an_in_flight_action(app, "charge", "x-1")
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    assert "Retry</button>" in client.get("/ns/default/runs/busy-1").get_data(as_text=True)
    assert api.post("/runs/busy-1/cancel", json={}).get_json()["status"] == "suspended"
    html = client.get("/ns/default/runs/busy-1").get_data(as_text=True)
    assert "A cancel was asked for" in html and "<code>charge</code>" in html
    assert "Retry</button>" not in html and "Fail</button>" not in html
    # The namespace's incidents page posts to the same route: no controls there either.
    listed = client.get("/ns/default/incidents").get_data(as_text=True)
    assert listed_runs(listed) == ["busy-1"] and "the run's end resolves this incident" in listed
    assert "Retry</button>" not in listed and 'name="action"' not in listed
