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
