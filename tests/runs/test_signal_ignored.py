"""`signal_ignored` records what `signal_received` does (the payload, the deadline the step was
issued with, the branch it happened in), whether or not the scanner has applied the timeout."""

from __future__ import annotations

from typing import Any

import pytest

START = "2030-05-01T00:00:00Z"
DEADLINE = "2030-05-01T00:01:00Z"


def _signal(step_id: str, name: str, on_timeout: str) -> dict[str, Any]:
    return {
        "id": step_id,
        "type": "signal",
        "signal": name,
        "timeout_seconds": 60,
        "on_timeout": on_timeout,
    }


def _deploy(api: Any, name: str, steps: list[dict[str, Any]]) -> None:
    assert api.post("/workflows", json={"name": name, "steps": steps}).status_code == 201
    assert api.post("/activations", json={"workflow": name}).status_code == 201


def _start(api: Any, workflow: str, run_id: str) -> None:
    assert api.post("/admin/clock", json={"now": START}).status_code == 200
    response = api.post("/runs", json={"workflow": workflow, "run_id": run_id})
    assert response.status_code == 201, response.get_json()
    assert api.post("/admin/tick", json={"work": True}).status_code == 200


def _ignored(api: Any, run_id: str) -> dict[str, Any]:
    items = api.get(f"/runs/{run_id}/history?limit=100").get_json()["items"]
    [event] = [event for event in items if event["event_type"] == "signal_ignored"]
    return event


def _send_late(api: Any, run_id: str, name: str, scanned: bool) -> dict[str, Any]:
    """Move the clock to the deadline (scanning it or not), then send `name` too late."""
    response = api.post("/admin/clock", json={"now": DEADLINE, "tick": scanned})
    assert response.status_code == 200
    response = api.post(f"/runs/{run_id}/signals/{name}", json={"payload": {"note": "later"}})
    assert response.status_code == 202
    body = response.get_json()
    assert (body["status"], body["reason"]) == ("ignored", "too_late")
    return body


@pytest.mark.parametrize("scanned", [False, True], ids=["before-scan", "after-scan"])
def test_too_late_signal_records_the_issued_deadline_and_its_payload(admin_api, scanned):
    _deploy(admin_api, "S", [_signal("sg", "x", "continue"), _signal("sg2", "y", "fail")])
    _start(admin_api, "S", "S1")
    body = _send_late(admin_api, "S1", "x", scanned)
    event = _ignored(admin_api, "S1")
    assert event["node_id"] == "sg"
    assert event["payload"] == {
        "signal_id": body["signal_id"],
        "signal": "x",
        "payload": {"note": "later"},
        "accepted_at": DEADLINE,
        "deadline": DEADLINE,
        "reason": "too_late",
    }
    assert "branch_path" not in event
    assert admin_api.get("/runs/S1/replay").get_json()["agree"] is True


@pytest.mark.parametrize("scanned", [False, True], ids=["before-scan", "after-scan"])
def test_too_late_signal_in_a_branch_carries_its_branch_path(admin_api, scanned):
    branches = [
        {"id": "a", "steps": [_signal("sg", "x", "continue")]},
        {"id": "b", "steps": [{"id": "w", "type": "wait", "duration": "PT1H"}]},
    ]
    _deploy(admin_api, "P", [{"id": "p", "type": "parallel", "branches": branches}])
    _start(admin_api, "P", "P1")
    body = _send_late(admin_api, "P1", "x", scanned)
    event = _ignored(admin_api, "P1")
    assert (event["node_id"], event.get("branch_path")) == ("sg", ["p/a"])
    assert event["payload"]["deadline"] == DEADLINE
    assert event["payload"]["payload"] == {"note": "later"}
    assert event["payload"]["signal_id"] == body["signal_id"]
    assert admin_api.get("/runs/P1/replay").get_json()["agree"] is True


def test_unexpected_signal_records_its_payload_and_no_deadline(admin_api):
    _deploy(admin_api, "U", [_signal("sg", "x", "fail"), _signal("sg2", "y", "fail")])
    _start(admin_api, "U", "U1")
    delivered = admin_api.post("/runs/U1/signals/x", json={"payload": 1})
    assert delivered.get_json()["status"] == "delivered"
    again = admin_api.post("/runs/U1/signals/x", json={"payload": 2}).get_json()
    assert (again["status"], again["reason"]) == ("ignored", "not_expected")
    event = _ignored(admin_api, "U1")
    assert event["payload"]["payload"] == 2
    assert event["payload"]["deadline"] is None
    assert event["payload"]["reason"] == "not_expected"
