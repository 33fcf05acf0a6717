"""Parallel steps: branch capacity, nesting, unique ids, outputs, branch paths, cancel."""

from __future__ import annotations

from datetime import timedelta

from app.context import clock, database
from app.runs import engine
from tests.conftest import FIXED_NOW


def _signal_branch(name: str) -> dict:
    return {"id": name, "steps": [{"id": f"wait-{name}", "type": "signal", "signal": name}]}


def _started_branches(scenario, run_id: str) -> list[str]:
    return [
        e["payload"]["branch"]
        for e in scenario.events(run_id)
        if e["event_type"] == "branch_started"
    ]


def test_capacity_two_of_three_starts_the_third_only_when_one_completes(scenario):
    scenario.deploy(
        "fan",
        [
            {
                "id": "fan-out",
                "type": "parallel",
                "max_concurrency": 2,
                "branches": [
                    _signal_branch("eu"),
                    _signal_branch("us"),
                    {
                        "id": "apac",
                        "steps": [
                            {"id": "apac-1", "type": "action", "action": "echo", "args": "A"}
                        ],
                    },
                ],
            }
        ],
    )
    run_id = scenario.start("fan")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "waiting"
    assert _started_branches(scenario, run_id) == ["eu", "us"]
    assert scenario.signal(run_id, "us", "U").get_json()["status"] == "delivered"
    assert _started_branches(scenario, run_id) == ["eu", "us", "apac"]
    assert scenario.run(run_id)["status"] == "running"
    scenario.tick()
    assert scenario.run(run_id)["status"] == "waiting"
    scenario.signal(run_id, "eu", "E")
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    assert run["output"] == {"eu": "E", "us": "U", "apac": "A"}
    events = scenario.events(run_id)
    apac = next(e for e in events if e["node_id"] == "apac-1" and e["event_type"] == "step_started")
    assert apac["branch_path"] == ["fan-out/apac"]
    root = next(e for e in events if e["event_type"] == "step_started")
    assert root["node_id"] == "fan-out" and "branch_path" not in root
    completions = [e["payload"]["branch"] for e in events if e["event_type"] == "branch_completed"]
    assert completions == ["us", "apac", "eu"]


def _waits(*names: str) -> list[dict]:
    return [
        {"id": n, "steps": [{"id": f"{n}-wait", "type": "wait", "duration": "PT1M"}]} for n in names
    ]


def test_nested_parallel_steps_each_keep_their_own_capacity(scenario):
    scenario.deploy(
        "nested",
        [
            {
                "id": "outer",
                "type": "parallel",
                "max_concurrency": 1,
                "branches": [
                    {
                        "id": "x",
                        "steps": [
                            {
                                "id": "inner",
                                "type": "parallel",
                                "max_concurrency": 1,
                                "branches": _waits("p", "q"),
                            }
                        ],
                    },
                    {
                        "id": "y",
                        "steps": [
                            {"id": "y-echo", "type": "action", "action": "echo", "args": "Y"}
                        ],
                    },
                ],
            },
            {"id": "after", "type": "action", "action": "echo", "args": "done"},
        ],
    )
    run_id = scenario.start("nested")["run_id"]
    scenario.tick()
    assert _started_branches(scenario, run_id) == ["x", "p"]
    p_wait = next(e for e in scenario.events(run_id) if e["node_id"] == "p-wait")
    assert p_wait["branch_path"] == ["outer/x", "inner/p"]
    scenario.advance(minutes=1)
    scenario.tick()
    assert _started_branches(scenario, run_id) == ["x", "p", "q"]
    assert scenario.run(run_id)["status"] == "waiting"
    scenario.advance(minutes=1)
    scenario.tick()
    assert _started_branches(scenario, run_id) == ["x", "p", "q", "y"]
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == "done"
    outputs = {
        e["node_id"]: e["payload"]["output"]
        for e in scenario.events(run_id)
        if e["event_type"] == "step_completed"
    }
    assert outputs["inner"] == {"p": None, "q": None}
    assert outputs["outer"] == {"x": {"p": None, "q": None}, "y": "Y"}


def _nest(depth: int) -> dict:
    step: dict = {"id": "leaf", "type": "action", "action": "noop"}
    for level in range(depth, 0, -1):
        step = {
            "id": f"level-{level}",
            "type": "parallel",
            "branches": [{"id": "b", "steps": [step]}],
        }
    return step


def test_duplicate_ids_anywhere_and_a_fifth_level_are_refused_at_deploy(scenario):
    duplicate = {
        "name": "dup",
        "steps": [
            {"id": "fetch", "type": "action", "action": "noop"},
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {"id": "a", "steps": [{"id": "fetch", "type": "action", "action": "noop"}]}
                ],
            },
        ],
    }
    response = scenario.api.post("/workflows", json=duplicate)
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["details"]["step"] == "fetch"
    assert error["details"]["errors"][0]["loc"] == ["steps", 1, "branches", 0, "steps", 0, "id"]
    assert "duplicate step id 'fetch'" in error["message"]
    deep = scenario.api.post("/workflows", json={"name": "deep", "steps": [_nest(5)]})
    assert deep.status_code == 422
    assert deep.get_json()["error"]["details"]["step"] == "level-5"
    assert (
        scenario.api.post("/workflows", json={"name": "deep", "steps": [_nest(4)]}).status_code
        == 201
    )
    same_branch = {
        "id": "fan",
        "type": "parallel",
        "branches": [
            {"id": "a", "steps": [{"id": "s1", "type": "action", "action": "noop"}]},
            {"id": "a", "steps": [{"id": "s2", "type": "action", "action": "noop"}]},
        ],
    }
    twice = scenario.api.post("/workflows", json={"name": "twice", "steps": [same_branch]})
    assert (
        twice.status_code == 422 and "duplicate branch id" in twice.get_json()["error"]["message"]
    )
    # A branch id is matched whole, as a step id is: '/' would split its path, and a trailing
    # newline would be stored as part of the id.
    for bad in ("a/b", "c\n", "x/fan/q", "ok id"):
        branch = {"id": bad, "steps": [{"id": "s1", "type": "action", "action": "noop"}]}
        fan = {"id": "fan", "type": "parallel", "branches": [branch]}
        refused = scenario.api.post("/workflows", json={"name": "slash", "steps": [fan]})
        assert refused.status_code == 422, bad
        error = refused.get_json()["error"]
        assert error["details"]["errors"][0]["loc"] == ["steps", 0, "branches", 0, "id"]
    assert scenario.api.get("/workflows/slash").status_code == 404
    assert scenario.api.get("/workflows/dup").status_code == 404


def test_cancel_reaches_every_branch_once_the_running_action_finishes(app, scenario):
    scenario.deploy(
        "three",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    _signal_branch("sig"),
                    _waits("slow")[0],
                    {
                        "id": "act",
                        "steps": [
                            {"id": "act-1", "type": "action", "action": "echo", "args": 1},
                            {"id": "act-2", "type": "action", "action": "echo", "args": 2},
                        ],
                    },
                ],
            }
        ],
    )
    run_id = scenario.start("three")["run_id"]
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    assert (
        engine.claim_next(database(app), clock(app), settings) is True
    )  # enters the parallel step
    claim = engine.claim_next(database(app), clock(app), settings)
    assert isinstance(claim, engine.Claim) and claim.context.step_id == "act-1"
    response = scenario.api.post(f"/runs/{run_id}/cancel", json={"reason": "enough"})
    assert response.get_json()["status"] == "running"  # act-1 is still executing
    assert scenario.signal(run_id, "sig").get_json()["status"] == "delivered"
    assert engine.commit_outcome(database(app), clock(app), claim, engine.execute(claim)) is True
    run = scenario.run(run_id)
    assert run["status"] == "cancelled"
    scenario.advance(minutes=5)
    assert scenario.tick().steps == 0
    types = scenario.types(run_id)
    assert "wait_elapsed" not in types and types.count("run_cancelled") == 1
    assert [e["node_id"] for e in scenario.events(run_id) if e["event_type"] == "step_started"] == [
        "fan",
        "wait-sig",
        "slow-wait",
        "act-1",
    ]
    assert scenario.api.get("/runs?status=waiting").get_json()["items"] == []


def test_terminate_stops_every_branch_and_discards_an_executing_step(app, scenario):
    scenario.deploy(
        "pair",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    _waits("w")[0],
                    {
                        "id": "a",
                        "steps": [{"id": "a-1", "type": "action", "action": "echo", "args": 1}],
                    },
                ],
            }
        ],
    )
    run_id = scenario.start("pair")["run_id"]
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    engine.claim_next(database(app), clock(app), settings)
    claim = engine.claim_next(database(app), clock(app), settings)
    assert isinstance(claim, engine.Claim)
    scenario.api.post(f"/runs/{run_id}/terminate", json={})
    assert engine.commit_outcome(database(app), clock(app), claim, engine.execute(claim)) is False
    scenario.advance(minutes=2)
    assert scenario.tick().steps == 0
    assert scenario.run(run_id)["status"] == "terminated"
    assert "step_completed" not in scenario.types(run_id)


def test_deadlines_across_branches_apply_in_due_then_node_order(scenario):
    scenario.deploy(
        "order",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {"id": "b2", "steps": [{"id": "z-wait", "type": "wait", "duration": "PT1M"}]},
                    {"id": "b1", "steps": [{"id": "a-wait", "type": "wait", "duration": "PT1M"}]},
                    {
                        "id": "b3",
                        "steps": [
                            {
                                "id": "m-sig",
                                "type": "signal",
                                "signal": "s",
                                "timeout_seconds": 60,
                                "on_timeout": "continue",
                            }
                        ],
                    },
                ],
            }
        ],
    )
    run_id = scenario.start("order")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    assert scenario.tick().deadlines == 3
    applied = [
        e["node_id"]
        for e in scenario.events(run_id)
        if e["event_type"] in ("wait_elapsed", "signal_timed_out")
    ]
    assert applied == ["m-sig", "a-wait", "z-wait"]
    assert scenario.run(run_id)["output"] == {"b2": None, "b1": None, "b3": None}


def test_two_workers_run_steps_of_two_branches_of_one_run_each_under_its_own_lease(app, scenario):
    scenario.deploy(
        "twin",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {
                        "id": "l",
                        "steps": [{"id": "left", "type": "action", "action": "echo", "args": "L"}],
                    },
                    {
                        "id": "r",
                        "steps": [{"id": "right", "type": "action", "action": "echo", "args": "R"}],
                    },
                ],
            }
        ],
    )
    run_id = scenario.start("twin")["run_id"]
    db, clk = database(app), clock(app)
    first = engine.WorkerSettings(name="one", queue=engine.ANY_QUEUE)
    second = engine.WorkerSettings(name="two", queue=engine.ANY_QUEUE)
    assert engine.claim_next(db, clk, first) is True
    left = engine.claim_next(db, clk, first)
    right = engine.claim_next(db, clk, second)
    assert (left.context.step_id, right.context.step_id) == ("left", "right")
    assert left.owner.startswith("one:") and right.owner.startswith("two:")
    assert engine.claim_next(db, clk, second) is False  # both steps are leased
    assert engine.commit_outcome(db, clk, right, engine.execute(right)) is True
    assert scenario.run(run_id)["status"] == "running"
    assert engine.commit_outcome(db, clk, left, engine.execute(left)) is True
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == {"l": "L", "r": "R"}


def test_a_result_whose_lease_lapsed_is_discarded_and_the_step_runs_again(app, scenario):
    scenario.deploy(
        "lapse",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {
                        "id": "b",
                        "steps": [{"id": "s", "type": "action", "action": "echo", "args": 1}],
                    }
                ],
            }
        ],
    )
    run_id = scenario.start("lapse")["run_id"]
    db, clk = database(app), clock(app)
    settings = engine.WorkerSettings(name="slow", queue=engine.ANY_QUEUE)
    engine.claim_next(db, clk, settings)
    claim = engine.claim_next(db, clk, settings)
    scenario.advance(seconds=engine.DEFAULT_LEASE_SECONDS)
    assert engine.commit_outcome(db, clk, claim, engine.execute(claim)) is False
    scenario.tick()
    assert scenario.run(run_id)["status"] == "completed"
    attempts = [
        e["payload"].get("attempt")
        for e in scenario.events(run_id)
        if e["node_id"] == "s" and e["event_type"] in ("step_started", "step_failed")
    ]
    assert attempts == [1, 1, 1]  # started, lost its lease (same attempt again), started again


def test_a_deploy_names_every_mistake_not_only_the_first(scenario):
    # One mistake per answer made a user resubmit four times.
    definition = {
        "name": "multi",
        "timeout_seconds": 0,
        "steps": [
            {"id": "a", "type": "action", "action": "nosuch"},
            {"id": "b", "type": "wait", "duration": "xx"},
            {"id": "a", "type": "task"},
            {"id": "fine", "type": "action", "action": "noop"},
        ],
    }
    refused = scenario.api.post("/workflows", json=definition)
    assert refused.status_code == 422
    error = refused.get_json()["error"]
    locs = [e["loc"] for e in error["details"]["errors"]]
    assert locs == [
        ["timeout_seconds"],
        ["steps", 0, "action"],
        ["steps", 1, "duration"],
        ["steps", 2, "id"],
    ]
    assert error["message"].startswith("timeout_seconds: ")
    assert error["message"].endswith("(and 3 more: see details.errors)")
    assert scenario.api.get("/workflows/multi").status_code == 404
