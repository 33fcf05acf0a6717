"""Replay: state rebuilt from history alone agrees with the stored run."""

from __future__ import annotations

from sqlalchemy import update

from app.auth.service import get_namespace
from app.context import database
from app.db import Run
from app.runs import lifecycle
from app.runs.replay import disagreements, replay_events
from tests.conftest import FIXED_NOW


def test_replay_endpoint_returns_both_states_and_agreement(scenario):
    scenario.deploy(
        "mixed",
        [
            {"id": "a", "type": "action", "action": "echo", "args": {"n": 1}},
            {"id": "w", "type": "wait", "duration": "PT1M"},
            {"id": "s", "type": "signal", "signal": "go"},
        ],
    )
    run_id = scenario.start("mixed")["run_id"]
    scenario.tick()
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is True
    assert (
        body["replayed"]
        == body["stored"]
        == {
            "status": "waiting",
            "current_step": "w",
            "step_outputs": {"a": {"n": 1}},
            "output": None,
            "error": None,
            "branches": {},
            "incidents": {},
        }
    )
    scenario.advance(minutes=1)
    scenario.tick()
    scenario.signal(run_id, "go", "ok")
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is True
    assert body["replayed"]["status"] == "completed" and body["replayed"]["output"] == "ok"
    assert scenario.api.get("/runs/nope/replay").status_code == 404


def test_replay_detects_a_stored_state_that_history_does_not_explain(app, scenario):
    scenario.deploy("one", [{"id": "a", "type": "action", "action": "echo", "args": 1}])
    run_id = scenario.start("one")["run_id"]
    scenario.tick()
    with database(app).session() as session:
        session.execute(update(Run).where(Run.run_id == run_id).values(status="failed"))
        session.commit()
        found = disagreements(session)
        assert [d["run_id"] for d in found] == [run_id]
        assert found[0]["replayed"]["status"] == "completed"
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is False and body["stored"]["status"] == "failed"
    with database(app).session() as session:  # put it back for the teardown replay check
        session.execute(update(Run).where(Run.run_id == run_id).values(status="completed"))
        session.commit()


def test_a_schedule_started_run_replays_from_its_origin_event(app, scenario):
    scenario.deploy("nightly", [{"id": "a", "type": "action", "action": "noop"}])
    with database(app).session() as session:
        namespace = get_namespace(session, "default")
        target = lifecycle.resolve_target(session, namespace, workflow="nightly")
        lifecycle.start_run(
            session,
            FIXED_NOW,
            namespace,
            target,
            "schedule:x:20260105T120000Z",
            {},
            origin={"schedule_id": "x"},
            schedule=("uid-1", "x"),
        )
        session.commit()
    scenario.tick()
    run = scenario.run("schedule:x:20260105T120000Z")
    assert run["status"] == "completed" and run["schedule_id"] == "x"
    assert scenario.types(run["run_id"])[:2] == ["ScheduleTriggered", "run_started"]


def test_replay_uses_only_recorded_facts():
    events = [
        ("run_started", None, {}),
        ("step_started", "a", {"type": "action", "attempt": 1}),
        ("step_failed", "a", {"will_retry": True}),
        ("step_started", "a", {"type": "action", "attempt": 2}),
        ("step_completed", "a", {"output": 5, "next_step": "b"}),
        ("step_started", "b", {"type": "task"}),
        ("run_terminated", None, {"reason": "x"}),
    ]
    assert replay_events(events) == {
        "status": "terminated",
        "current_step": "b",
        "step_outputs": {"a": 5},
        "output": None,
        "error": None,
        "branches": {},
        "incidents": {},
    }


def test_replay_reproduces_branches_held_continuations_and_incidents(scenario):
    scenario.deploy(
        "mixed-fan",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {"id": "bad", "steps": [{"id": "boom", "type": "action", "action": "fail"}]},
                    {"id": "slow", "steps": [{"id": "pause", "type": "wait", "duration": "PT1M"}]},
                ],
            }
        ],
        on_step_failure="incident",
    )
    run_id = scenario.start("mixed-fan")["run_id"]
    scenario.tick()
    scenario.advance(minutes=2)
    scenario.tick()
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is True
    replayed = body["replayed"]
    assert replayed["status"] == "suspended" and replayed["current_step"] == "fan"
    assert replayed["branches"] == {
        "fan/bad": {"current_step": "boom", "done": False},
        "fan/slow": {"current_step": "pause", "done": False},
    }
    ((incident_id, resolution),) = replayed["incidents"].items()
    assert resolution is None
    scenario.api.post(f"/runs/{run_id}/incidents/{incident_id}/resolve", json={"action": "skip"})
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is True
    assert body["replayed"]["status"] == "completed"
    assert body["replayed"]["incidents"] == {incident_id: "skip"}
    assert body["replayed"]["output"] == {"bad": None, "slow": None}
    assert all(branch["done"] for branch in body["replayed"]["branches"].values())
