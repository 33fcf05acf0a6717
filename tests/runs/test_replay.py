"""Replay: state rebuilt from history alone agrees with the stored run."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, update

from app.auth.service import get_namespace
from app.context import clock, database
from app.db import Run
from app.db.runs import RunHistoryEvent
from app.runs import engine, lifecycle
from app.runs import replay as replay_module
from app.runs.replay import disagreements, first_steps_of, replay_events, stored_state
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


def _compared(scenario, run_id):
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert body["agree"] is True, (body["replayed"], body["stored"])
    return body["stored"]


def _worker(app):
    """Claim and commit steps one at a time, as a worker would, without the tick's drain."""
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    db, clk = database(app), clock(app)
    return (
        lambda: engine.claim_next(db, clk, settings),
        lambda claim: engine.commit_outcome(db, clk, claim, engine.execute(claim)),
    )


FAILING_X = {
    "id": "x",
    "steps": [{"id": "xf", "type": "action", "action": "fail", "args": {"message": "boom"}}],
}
ECHO_THEN_WAIT_Y = {
    "id": "y",
    "steps": [
        {"id": "ys", "type": "action", "action": "echo", "args": "y"},
        {"id": "yw", "type": "wait", "duration": "PT5S"},
    ],
}


def _end(scenario, run_id, how):
    if how == "timeout":
        scenario.advance(hours=1)
        scenario.tick(work=False)
    else:
        response = scenario.api.post(f"/runs/{run_id}/{how}", json={})
        assert response.status_code == 200, response.get_json()


@pytest.mark.parametrize(
    ("how", "status"),
    [("terminate", "terminated"), ("cancel", "cancelled"), ("timeout", "timed_out")],
)
def test_a_completion_held_by_an_incident_stays_held_when_the_run_ends(app, scenario, how, status):
    # The run's end resolves its incidents with a null report and releases nothing; replay took
    # that resolution for the barrier lifting and moved the held branch on to its next step.
    scenario.deploy(
        "held-end",
        [{"id": "par", "type": "parallel", "branches": [FAILING_X, ECHO_THEN_WAIT_Y]}],
        on_step_failure="incident",
        timeout_seconds=600,
    )
    run_id = scenario.start("held-end")["run_id"]
    claim, commit = _worker(app)
    assert claim() is True  # enters the parallel step, starting both branches
    failing, in_flight = claim(), claim()
    assert (failing.context.step_id, in_flight.context.step_id) == ("xf", "ys")
    assert commit(failing) and commit(in_flight)
    completed = next(e for e in scenario.events(run_id) if e["event_type"] == "step_completed")
    assert completed["node_id"] == "ys" and completed["payload"]["held"] is True
    assert _compared(scenario, run_id)["status"] == "suspended"
    _end(scenario, run_id, how)
    stored = _compared(scenario, run_id)
    assert stored["status"] == status
    assert stored["branches"]["par/y"] == {"current_step": "ys", "done": False}
    assert set(stored["incidents"].values()) == {f"run_{status}"}


def test_an_elapsed_wait_held_by_an_incident_stays_at_the_wait_when_the_run_is_terminated(
    scenario,
):
    slow = {
        "id": "slow",
        "steps": [
            {"id": "pause", "type": "wait", "duration": "PT1M"},
            {"id": "after", "type": "action", "action": "noop"},
        ],
    }
    scenario.deploy(
        "held-wait",
        [{"id": "fan", "type": "parallel", "branches": [FAILING_X, slow]}],
        on_step_failure="incident",
    )
    run_id = scenario.start("held-wait")["run_id"]
    scenario.tick()
    scenario.advance(minutes=1)
    scenario.tick(work=False)
    assert "wait_elapsed" in scenario.types(run_id)
    assert _compared(scenario, run_id)["status"] == "suspended"
    assert scenario.api.post(f"/runs/{run_id}/terminate", json={}).status_code == 200
    stored = _compared(scenario, run_id)
    assert stored["status"] == "terminated"
    assert stored["branches"]["fan/slow"] == {"current_step": "pause", "done": False}


def test_two_incidents_both_closed_by_terminate_release_nothing(app, scenario):
    other_x = {
        "id": "z",
        "steps": [{"id": "zf", "type": "action", "action": "fail", "args": {"message": "bang"}}],
    }
    scenario.deploy(
        "two-incidents",
        [{"id": "par", "type": "parallel", "branches": [FAILING_X, other_x, ECHO_THEN_WAIT_Y]}],
        on_step_failure="incident",
    )
    run_id = scenario.start("two-incidents")["run_id"]
    claim, commit = _worker(app)
    assert claim() is True
    claims = [claim(), claim(), claim()]
    assert [c.context.step_id for c in claims] == ["xf", "zf", "ys"]
    assert all(commit(c) for c in claims)
    assert list(_compared(scenario, run_id)["incidents"].values()) == [None, None]
    assert scenario.api.post(f"/runs/{run_id}/terminate", json={}).status_code == 200
    stored = _compared(scenario, run_id)
    assert stored["branches"]["par/y"] == {"current_step": "ys", "done": False}
    assert list(stored["incidents"].values()) == ["run_terminated", "run_terminated"]


def _gated(scenario, name, parallel):
    """A run of `name` (a signal `go`, then `parallel`) whose signal was just delivered: its
    branches have started and no worker has claimed their first steps yet."""
    scenario.deploy(name, [{"id": "gate", "type": "signal", "signal": "go"}, parallel])
    run_id = scenario.start(name, queue="nobody-serves-this")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "waiting"
    assert scenario.signal(run_id, "go").get_json()["status"] == "delivered"
    return run_id


def _noop_branch(name):
    return {"id": name, "steps": [{"id": f"{name}a", "type": "action", "action": "noop"}]}


def test_a_started_branch_is_at_its_first_step_before_any_worker_claims_it(scenario):
    # The engine puts a starting branch at its first step; no event names it until the step is
    # claimed (an action's step_started), so replay had the branch at no step at all.
    parallel = {
        "id": "par",
        "type": "parallel",
        "branches": [_noop_branch("b1"), _noop_branch("b2")],
    }
    run_id = _gated(scenario, "gated", parallel)
    stored = _compared(scenario, run_id)
    assert stored["status"] == "running" and stored["current_step"] == "par"
    assert stored["branches"] == {
        "par/b1": {"current_step": "b1a", "done": False},
        "par/b2": {"current_step": "b2a", "done": False},
    }
    assert scenario.api.post(f"/runs/{run_id}/terminate", json={}).status_code == 200
    assert _compared(scenario, run_id)["branches"]["par/b2"]["current_step"] == "b2a"


def test_a_history_recorded_before_branch_started_named_the_first_step_replays_the_same(
    app, scenario
):
    parallel = {"id": "par", "type": "parallel", "branches": [_noop_branch("b1")]}
    run_id = _gated(scenario, "older", parallel)
    with database(app).session() as session:
        run = session.scalar(select(Run).where(Run.run_id == run_id))
        rows = session.execute(
            select(RunHistoryEvent.event_type, RunHistoryEvent.node_id)
            .add_columns(RunHistoryEvent.payload, RunHistoryEvent.branch_path)
            .where(RunHistoryEvent.run_pk == run.id)
            .order_by(RunHistoryEvent.sequence)
        ).all()
        events = [(row[0], row[1], dict(row[2] or {}), row[3]) for row in rows]
        started = [event for event in events if event[0] == "branch_started"]
        assert started and all(event[2]["first_step"] == "b1a" for event in started)
        for event in started:
            del event[2]["first_step"]  # as the engine recorded it before 2026-12-03
        assert replay_events(events)["branches"]["par/b1"]["current_step"] is None
        first_steps = first_steps_of(session, events)
        assert first_steps == {"par/b1": "b1a"}
        assert replay_events(events, first_steps) == stored_state(session, run)


def test_a_branch_started_when_a_slot_frees_is_at_its_first_step(app, scenario):
    parallel = {
        "id": "par",
        "type": "parallel",
        "max_concurrency": 1,
        "branches": [_noop_branch("b1"), _noop_branch("b2")],
    }
    run_id = _gated(scenario, "one-at-a-time", parallel)
    assert list(_compared(scenario, run_id)["branches"]) == ["par/b1"]
    claim, commit = _worker(app)
    assert commit(claim())
    stored = _compared(scenario, run_id)
    assert stored["branches"] == {
        "par/b1": {"current_step": "b1a", "done": True},
        "par/b2": {"current_step": "b2a", "done": False},
    }
    assert scenario.api.post(f"/runs/{run_id}/cancel", json={}).status_code == 200
    assert _compared(scenario, run_id)["status"] == "cancelled"


def test_nested_branches_are_at_their_first_steps_before_any_worker_claims_them(scenario):
    inner = {"id": "inner", "type": "parallel", "branches": [_noop_branch("p"), _noop_branch("q")]}
    parallel = {
        "id": "outer",
        "type": "parallel",
        "branches": [{"id": "x", "steps": [inner]}, _noop_branch("y")],
    }
    run_id = _gated(scenario, "nested-gated", parallel)
    assert _compared(scenario, run_id)["branches"] == {
        "outer/x": {"current_step": "inner", "done": False},
        "outer/x/inner/p": {"current_step": "pa", "done": False},
        "outer/x/inner/q": {"current_step": "qa", "done": False},
        "outer/y": {"current_step": "ya", "done": False},
    }


def test_branches_not_claimed_when_an_incident_suspends_the_run_are_at_their_first_step(
    app, scenario
):
    scenario.deploy(
        "suspended-early",
        [{"id": "par", "type": "parallel", "branches": [FAILING_X, ECHO_THEN_WAIT_Y]}],
        on_step_failure="incident",
    )
    run_id = scenario.start("suspended-early")["run_id"]
    claim, commit = _worker(app)
    assert claim() is True
    failing = claim()
    assert failing.context.step_id == "xf" and commit(failing)
    stored = _compared(scenario, run_id)
    assert stored["status"] == "suspended"
    assert stored["branches"]["par/y"] == {"current_step": "ys", "done": False}
    assert scenario.api.post(f"/runs/{run_id}/terminate", json={}).status_code == 200
    assert _compared(scenario, run_id)["branches"]["par/y"]["current_step"] == "ys"


def test_a_step_committed_while_the_replay_reads_does_not_make_it_disagree(
    app, scenario, monkeypatch
):
    # PostgreSQL reads each statement in its own snapshot: a worker committing between the
    # reads of the run and of its history made a healthy run answer `agree: false`.
    scenario.deploy("two", [{"id": f"a{i}", "type": "action", "action": "echo"} for i in (1, 2)])
    run_id = scenario.start("two")["run_id"]
    claim, commit = _worker(app)
    leased = claim()
    committed = []
    worker = threading.Thread(target=lambda: committed.append(commit(leased)))
    read_history = replay_module.replay

    def commit_while_reading(session, run):
        worker.start()
        # Joined with a bound: where the run is locked for the read, the commit waits for it.
        worker.join(timeout=2)
        return read_history(session, run)

    monkeypatch.setattr(replay_module, "replay", commit_while_reading)
    body = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    monkeypatch.undo()
    worker.join()
    assert committed == [True]
    assert body["agree"] is True, (body["replayed"], body["stored"])
    after = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert after["agree"] is True and after["stored"]["step_outputs"] == {"a1": {}}
