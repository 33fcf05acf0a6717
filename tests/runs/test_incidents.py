"""Incidents: the barrier, deadlines observed while suspended, resolve and its report, lists."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import FIXED_NOW
from tests.support import flaky_actions  # noqa: F401 - registers `flaky`
from tests.support.in_flight import finish_in_flight, incident_beside_an_in_flight_action

MS = timedelta(milliseconds=1)
BROKEN = {
    "id": "broken",
    "steps": [
        {"id": "charge", "type": "action", "action": "fail", "args": {"message": "card declined"}}
    ],
}


def _deploy(scenario, name, other_branch, **extra):
    scenario.deploy(
        name,
        [{"id": "fan", "type": "parallel", "branches": [BROKEN, other_branch]}],
        on_step_failure="incident",
        **extra,
    )


def _incident(scenario, run_id):
    items = scenario.api.get(f"/runs/{run_id}/incidents").get_json()["items"]
    assert len(items) == 1
    return items[0]


def _resolve(scenario, run_id, incident_id, action, **body):
    return scenario.api.post(
        f"/runs/{run_id}/incidents/{incident_id}/resolve", json={"action": action, **body}
    )


def test_a_wait_elapsing_during_an_incident_is_consumed_once_and_its_continuation_held(scenario):
    slow = {
        "id": "slow",
        "steps": [
            {"id": "pause", "type": "wait", "duration": "PT1M"},
            {"id": "after", "type": "action", "action": "echo", "args": "late"},
        ],
    }
    _deploy(scenario, "inc", slow)
    run_id = scenario.start("inc")["run_id"]
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "suspended"
    incident = _incident(scenario, run_id)
    assert incident["node_id"] == "charge" and incident["branch_path"] == ["fan/broken"]
    assert incident["attempts"] == 1 and incident["resolved_at"] is None
    assert incident["error"]["message"] == "card declined"
    for minutes in (1, 2, 3):
        scenario.set_clock(FIXED_NOW + timedelta(minutes=minutes))
        scenario.tick()
    types = scenario.types(run_id)
    assert types.count("wait_elapsed") == 1
    elapsed = next(e for e in scenario.events(run_id) if e["event_type"] == "wait_elapsed")
    assert elapsed["payload"]["deadline"] == "2026-01-05T12:01:00Z"
    assert elapsed["payload"]["observed_at"] == "2026-01-05T12:01:00Z"
    assert elapsed["branch_path"] == ["fan/slow"]
    assert "after" not in [
        e["node_id"] for e in scenario.events(run_id) if e["event_type"] == "step_started"
    ]
    assert scenario.run(run_id)["status"] == "suspended"
    response = _resolve(scenario, run_id, incident["id"], "skip", output={"charged": False})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["resolution"] == "skip" and body["resolved_at"] == "2026-01-05T12:03:00Z"
    assert body["report"] == {"held_continuations": 1, "elapsed_waits": 1, "timeouts": 0}
    assert scenario.run(run_id)["status"] == "running"
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    assert run["output"] == {"broken": {"charged": False}, "slow": "late"}
    assert _incident(scenario, run_id)["report"] == body["report"]
    assert scenario.types(run_id).count("incident_resolved") == 1
    again = _resolve(scenario, run_id, incident["id"], "retry")
    assert again.status_code == 409


def test_a_branch_completing_during_an_incident_keeps_its_capacity_slot(scenario):
    scenario.deploy(
        "slots",
        [
            {
                "id": "fan",
                "type": "parallel",
                "max_concurrency": 2,
                "branches": [
                    BROKEN,
                    {"id": "quick", "steps": [{"id": "q", "type": "signal", "signal": "go"}]},
                    {
                        "id": "third",
                        "steps": [{"id": "t", "type": "action", "action": "echo", "args": 3}],
                    },
                ],
            }
        ],
        on_step_failure="incident",
    )
    run_id = scenario.start("slots")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "suspended"
    assert scenario.signal(run_id, "go", "Q").get_json()["status"] == "delivered"
    scenario.tick()
    started = [
        e["payload"]["branch"]
        for e in scenario.events(run_id)
        if e["event_type"] == "branch_started"
    ]
    assert started == ["broken", "quick"]
    assert "branch_completed" not in scenario.types(run_id)
    incident = _incident(scenario, run_id)
    report = _resolve(scenario, run_id, incident["id"], "skip").get_json()["report"]
    assert report == {"held_continuations": 1, "elapsed_waits": 0, "timeouts": 0}
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == {
        "broken": None,
        "quick": "Q",
        "third": 3,
    }


def test_the_run_timeout_still_wins_during_an_incident(scenario):
    _deploy(
        scenario,
        "late",
        {"id": "w", "steps": [{"id": "pause", "type": "wait", "duration": "PT1H"}]},
        timeout_seconds=600,
    )
    run_id = scenario.start("late")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "suspended"
    scenario.set_clock(FIXED_NOW + timedelta(hours=2))
    scenario.tick()
    assert scenario.run(run_id)["status"] == "timed_out"
    incident = _incident(scenario, run_id)
    assert (
        incident["resolution"] == "run_timed_out"
        and incident["resolved_at"] == "2026-01-05T14:00:00Z"
    )
    types = scenario.types(run_id)
    assert "wait_elapsed" not in types and types[-2:] == ["incident_resolved", "run_timed_out"]
    assert _resolve(scenario, run_id, incident["id"], "skip").status_code == 409
    listed = scenario.api.get("/incidents?status=resolved").get_json()["items"]
    assert [i["id"] for i in listed] == [incident["id"]]
    assert scenario.api.get("/incidents?status=open").get_json()["items"] == []


@pytest.mark.parametrize(("offset", "outcome"), [(-MS, "delivered"), (timedelta(0), "ignored")])
def test_a_signal_during_an_incident_wins_only_strictly_before_its_deadline(
    scenario, offset, outcome
):
    approval = {
        "id": "ok",
        "steps": [
            {
                "id": "approval",
                "type": "signal",
                "signal": "approve",
                "timeout_seconds": 60,
                "on_timeout": "continue",
            }
        ],
    }
    _deploy(scenario, "approve", approval)
    run_id = scenario.start("approve")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "suspended"
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60) + offset)
    body = scenario.signal(run_id, "approve", "yes").get_json()
    assert body["status"] == outcome
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    scenario.tick()
    incident = _incident(scenario, run_id)
    report = _resolve(scenario, run_id, incident["id"], "skip").get_json()["report"]
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    if outcome == "delivered":
        assert report == {"held_continuations": 1, "elapsed_waits": 0, "timeouts": 0}
        assert run["output"]["ok"] == "yes"
        assert "signal_timed_out" not in scenario.types(run_id)
    else:
        assert body["reason"] == "too_late"
        assert report == {"held_continuations": 1, "elapsed_waits": 0, "timeouts": 1}
        assert run["output"]["ok"] is None
        assert scenario.types(run_id).count("signal_timed_out") == 1


def test_a_timeout_that_fails_the_run_is_held_until_the_incident_is_resolved(scenario):
    approval = {
        "id": "ok",
        "steps": [{"id": "approval", "type": "signal", "signal": "approve", "timeout_seconds": 60}],
    }
    _deploy(scenario, "strict", approval)
    run_id = scenario.start("strict")["run_id"]
    scenario.tick()
    scenario.advance(minutes=2)
    scenario.tick()
    assert scenario.run(run_id)["status"] == "suspended"
    incident = _incident(scenario, run_id)
    report = _resolve(scenario, run_id, incident["id"], "skip").get_json()["report"]
    assert report == {"held_continuations": 1, "elapsed_waits": 0, "timeouts": 1}
    run = scenario.run(run_id)
    assert run["status"] == "failed" and run["error"]["type"] == "signal_timed_out"


def test_retry_runs_the_step_again_from_attempt_one(scenario):
    scenario.deploy(
        "flaky",
        [
            {
                "id": "charge",
                "type": "action",
                "action": "flaky",
                "args": {"failures": 2},
                "retry": {"max_attempts": 2},
            },
            {"id": "after", "type": "action", "action": "echo", "args": "done"},
        ],
        on_step_failure="incident",
    )
    run_id = scenario.start("flaky")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "suspended"
    incident = _incident(scenario, run_id)
    assert incident["attempts"] == 2 and incident["branch_path"] == []
    body = _resolve(scenario, run_id, incident["id"], "retry").get_json()
    assert body["resolution"] == "retry"
    assert body["report"] == {"held_continuations": 0, "elapsed_waits": 0, "timeouts": 0}
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == "done"
    attempts = [
        e["payload"]["attempt"]
        for e in scenario.events(run_id)
        if e["event_type"] == "step_started" and e["node_id"] == "charge"
    ]
    assert attempts == [1, 2, 1]


def test_only_a_skip_takes_an_output(scenario):
    """An output sent with `retry` or `fail` was taken and dropped without a word."""
    _deploy(
        scenario, "out", {"id": "w", "steps": [{"id": "w-1", "type": "wait", "duration": "PT1H"}]}
    )
    run_id = scenario.start("out")["run_id"]
    scenario.tick()
    incident = _incident(scenario, run_id)
    for action in ("retry", "fail"):
        refused = _resolve(scenario, run_id, incident["id"], action, output=5)
        assert refused.status_code == 422
        error = refused.get_json()["error"]
        assert error["details"]["errors"][0]["loc"] == ["output"], error
        assert "only 'skip' takes an output" in error["message"]
    assert _incident(scenario, run_id)["resolved_at"] is None
    taken = _resolve(scenario, run_id, incident["id"], "skip", output={"paid": False})
    assert taken.status_code == 200 and taken.get_json()["resolution"] == "skip"


def test_fail_ends_the_run_and_a_viewer_cannot_resolve(scenario, api_for):
    _deploy(
        scenario,
        "doomed",
        {"id": "w", "steps": [{"id": "pause", "type": "wait", "duration": "PT1H"}]},
    )
    run_id = scenario.start("doomed")["run_id"]
    scenario.tick()
    incident = _incident(scenario, run_id)
    viewer = api_for("vera", "viewer")
    denied = viewer.post(
        f"/runs/{run_id}/incidents/{incident['id']}/resolve", json={"action": "skip"}
    )
    assert denied.status_code == 403
    assert denied.get_json()["error"]["details"]["grant"] == "run.manage"
    assert viewer.get(f"/runs/{run_id}/incidents").status_code == 200
    assert scenario.run(run_id)["status"] == "suspended"
    bad = _resolve(scenario, run_id, incident["id"], "ignore")
    assert bad.status_code == 422
    missing = _resolve(scenario, run_id, "no-such-incident", "skip")
    assert missing.status_code == 404
    body = _resolve(scenario, run_id, incident["id"], "fail").get_json()
    assert body["resolution"] == "fail"
    run = scenario.run(run_id)
    assert run["status"] == "failed" and run["error"]["incident_id"] == incident["id"]
    assert scenario.api.get("/incidents?status=bogus").status_code == 422


def test_incident_lists_page_with_cursors_and_are_served_under_the_namespace_path(scenario):
    scenario.deploy(
        "solo", [{"id": "boom", "type": "action", "action": "fail"}], on_step_failure="incident"
    )
    run_ids = [scenario.start("solo")["run_id"] for _ in range(3)]
    scenario.tick()
    first = scenario.api.get("/namespaces/default/incidents?status=open&limit=2").get_json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = scenario.api.get(
        f"/namespaces/default/incidents?status=open&limit=2&cursor={first['next_cursor']}"
    ).get_json()
    assert rest["next_cursor"] is None
    seen = {i["run_id"] for i in first["items"] + rest["items"]}
    assert seen == set(run_ids)
    forged = scenario.api.get(f"/runs/{run_ids[0]}/incidents?cursor={first['next_cursor']}")
    assert forged.status_code == 400
    for item in first["items"] + rest["items"]:
        assert _resolve(scenario, item["run_id"], item["id"], "fail").status_code == 200
    assert scenario.api.get("/incidents?status=open").get_json()["items"] == []


def test_cancel_during_an_incident_ends_the_run_once_in_flight_actions_record(app, scenario):
    scenario.deploy(
        "busy",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {
                        "id": "x",
                        "steps": [{"id": "x-1", "type": "action", "action": "echo", "args": "x"}],
                    },
                    BROKEN,
                ],
            }
        ],
        on_step_failure="incident",
    )
    run_id = scenario.start("busy")["run_id"]
    in_flight = incident_beside_an_in_flight_action(app, "charge", "x-1")
    assert scenario.run(run_id)["status"] == "suspended"
    assert scenario.api.post(f"/runs/{run_id}/cancel", json={}).get_json()["status"] == "suspended"
    # The run is ending: a resolution would be recorded (a `retry` read as retried) and never
    # happen, so each is refused, and the run's end resolves the incident.
    incident = _incident(scenario, run_id)
    for action in ("retry", "skip", "fail"):
        refused = _resolve(scenario, run_id, incident["id"], action)
        assert refused.status_code == 409, refused.get_json()
        assert refused.get_json()["error"]["details"]["reason"] == "cancel_requested"
    assert _incident(scenario, run_id)["resolved_at"] is None
    assert "incident_resolved" not in [e["event_type"] for e in scenario.events(run_id)]
    finish_in_flight(app, in_flight)
    run = scenario.run(run_id)
    assert run["status"] == "cancelled"
    assert _incident(scenario, run_id)["resolution"] == "run_cancelled"
    completed = [e for e in scenario.events(run_id) if e["event_type"] == "step_completed"]
    assert [e["node_id"] for e in completed] == ["x-1"]


def _wait_elapsed_behind_an_incident(scenario, name, other_branch):
    """A run of `name` whose broken branch opened an incident and whose other branch's
    one-minute wait then elapsed, held behind it: its id and the incident."""
    _deploy(scenario, name, other_branch)
    run_id = scenario.start(name)["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(minutes=1))
    scenario.tick(work=False)
    return run_id, _incident(scenario, run_id)


def _agrees(scenario, run_id) -> bool:
    return bool(scenario.api.get(f"/runs/{run_id}/replay").get_json()["agree"])


def test_replay_agrees_as_soon_as_held_work_is_released_and_after_the_run_ends(scenario):
    # The release moves a held branch to its next step without an event of its own; replay
    # kept the branch at its held step until a worker started the next one, or for ever if
    # the run ended first.
    slow = {
        "id": "slow",
        "steps": [
            {"id": "pause", "type": "wait", "duration": "PT1M"},
            {"id": "after", "type": "action", "action": "noop"},
        ],
    }
    run_id, incident = _wait_elapsed_behind_an_incident(scenario, "released", slow)
    resolved = _resolve(scenario, run_id, incident["id"], "skip", output={"s": 1})
    assert resolved.get_json()["report"]["held_continuations"] == 1
    assert _agrees(scenario, run_id)
    assert scenario.api.post(f"/runs/{run_id}/terminate", json={}).status_code == 200
    assert scenario.run(run_id)["status"] == "terminated" and _agrees(scenario, run_id)


def test_a_fail_resolution_releases_nothing_and_says_so(scenario):
    slow = {"id": "slow", "steps": [{"id": "pause", "type": "wait", "duration": "PT1M"}]}
    run_id, incident = _wait_elapsed_behind_an_incident(scenario, "failing", slow)
    body = _resolve(scenario, run_id, incident["id"], "fail").get_json()
    assert body["report"] == {"held_continuations": 0, "elapsed_waits": 0, "timeouts": 0}
    assert scenario.run(run_id)["status"] == "failed" and _agrees(scenario, run_id)


def test_incidents_opened_in_one_instant_list_newest_first_in_the_order_they_opened(scenario):
    """Ties in the opening time are broken by the order the incidents were opened (their ids
    sort so), the same on every database, not at random."""
    scenario.deploy(
        "solo", [{"id": "boom", "type": "action", "action": "fail"}], on_step_failure="incident"
    )
    for _ in range(6):
        scenario.start("solo")
    scenario.tick()
    listed = scenario.api.get("/incidents?status=open").get_json()["items"]
    assert len(listed) == 6 and len({i["opened_at"] for i in listed}) == 1
    opened = {}
    for item in listed:
        events = scenario.api.get(f"/runs/{item['run_id']}/history").get_json()["items"]
        (event,) = [e for e in events if e["event_type"] == "incident_opened"]
        opened[item["id"]] = event["id"]
    assert [i["id"] for i in listed] == sorted(opened, key=opened.__getitem__, reverse=True)
