"""Who changed a run is in its history: the `command_context` of each change someone asked for.

Runs started, cancelled or terminated and incidents resolved through the API or the console
record who asked, through which door, the request id and the reason, as schedule events do; a
run a schedule's `terminate_other` ends names the scheduler and the schedule's principal.
"""

from __future__ import annotations

from app.ticker.tick import run_tick
from tests.console.test_pages import csrf_from, sign_in

WAITS = {"name": "waits", "steps": [{"id": "go", "type": "signal", "signal": "go"}]}
STUCK = {
    "name": "stuck",
    "on_step_failure": "incident",
    "steps": [{"id": "charge", "type": "action", "action": "fail", "args": {"message": "no"}}],
}


def _deploy(api, definition):
    assert api.post("/workflows", json=definition).status_code == 201
    assert api.post("/activations", json={"workflow": definition["name"]}).status_code == 201


def _payload(api, run_id, event_type):
    events = api.get(f"/runs/{run_id}/history?limit=100").get_json()["items"]
    found = [e["payload"] for e in events if e["event_type"] == event_type]
    assert len(found) == 1, (event_type, [e["event_type"] for e in events])
    return found[0]


def test_api_changes_to_a_run_record_who_asked_through_which_door(app, admin_api, api_for):
    _deploy(admin_api, WAITS)
    _deploy(admin_api, STUCK)
    api = api_for("rita", "operator")
    cli = {"X-Almanac-Source": "cli", "X-Request-Id": "req-7"}
    started = api.post("/runs", json={"workflow": "waits", "run_id": "w1"}, headers=cli)
    assert started.status_code == 201
    assert _payload(api, "w1", "run_started")["command_context"] == {
        "actor": "rita",
        "source": "cli",
        "request_id": "req-7",
        "reason": None,
    }
    api.post("/runs", json={"workflow": "waits", "run_id": "w2"})
    run_tick(app, work=True)
    cancel = api.post("/runs/w1/cancel", json={"reason": "wrong input"}, headers=cli)
    assert cancel.status_code == 200 and cancel.get_json()["status"] == "cancelled"
    for event_type in ("cancel_requested", "run_cancelled"):
        payload = _payload(api, "w1", event_type)
        assert payload["reason"] == "wrong input"
        assert payload["command_context"] == {
            "actor": "rita",
            "source": "cli",
            "request_id": "req-7",
            "reason": "wrong input",
        }
    assert api.post("/runs/w2/terminate", json={}).status_code == 200
    context = _payload(api, "w2", "run_terminated")["command_context"]
    assert context["actor"] == "rita" and context["source"] == "api" and context["reason"] is None
    assert context["request_id"]  # generated when the client sent none
    api.post("/runs", json={"workflow": "stuck", "run_id": "s1"})
    run_tick(app, work=True)
    incident = api.get("/runs/s1/incidents").get_json()["items"][0]
    resolved = api.post(
        f"/runs/s1/incidents/{incident['id']}/resolve",
        json={"action": "fail"},
        headers={"X-Almanac-Source": "sdk"},
    )
    assert resolved.status_code == 200
    context = _payload(api, "s1", "incident_resolved")["command_context"]
    assert context["actor"] == "rita" and context["source"] == "sdk"
    # A refused change writes no event: w1 is finished.
    assert api.post("/runs/w1/terminate", json={}).status_code == 409
    assert "run_terminated" not in [
        e["event_type"] for e in api.get("/runs/w1/history").get_json()["items"]
    ]


def test_console_changes_to_a_run_record_the_signed_in_user(app, client, accounts, api_for):
    api = api_for("dora", "admin")
    _deploy(api, WAITS)
    api.post("/runs", json={"workflow": "waits", "run_id": "c1"})
    run_tick(app, work=True)
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    page = client.get("/ns/default/runs/c1")
    done = client.post(
        "/ns/default/runs/c1/terminate",
        data={"csrf_token": csrf_from(page)},
        follow_redirects=True,
    )
    assert done.status_code == 200
    payload = _payload(api, "c1", "run_terminated")
    assert payload["reason"] is None
    assert payload["command_context"]["actor"] == "olga"
    assert payload["command_context"]["source"] == "console"
    # The run page shows it in the event's payload.
    html = client.get("/ns/default/runs/c1").get_data(as_text=True)
    assert "&#34;actor&#34;: &#34;olga&#34;" in html or '"actor": "olga"' in html


def test_a_run_ended_by_a_newer_one_names_the_scheduler_and_the_principal(app, admin_api, api_for):
    _deploy(admin_api, WAITS)
    api = api_for("sam", "operator")
    body = {
        "id": "every-minute",
        "cron": "* * * * *",
        "workflow": "waits",
        "overlap_policy": "terminate_other",
    }
    assert api.post("/schedules", json=body).status_code == 201
    for now in ("2026-01-05T12:01:00Z", "2026-01-05T12:02:00Z"):
        assert admin_api.post("/admin/clock", json={"now": now, "tick": True}).status_code == 200
    runs = api.get("/runs?schedule_id=every-minute").get_json()["items"]
    ended = [run for run in runs if run["status"] == "terminated"]
    assert len(ended) == 1
    context = _payload(api, ended[0]["run_id"], "run_terminated")["command_context"]
    assert context["actor"] == "sam" and context["source"] == "scheduler"
    assert "started a newer run (terminate_other)" in context["reason"]
