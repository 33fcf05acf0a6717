"""Each step type end to end: action, wait, signal, task; retries; output; history."""

from __future__ import annotations

from datetime import timedelta

from tests.conftest import FIXED_NOW


def test_action_steps_run_in_order_and_store_each_output(scenario):
    scenario.deploy(
        "two-echoes",
        [
            {"id": "first", "type": "action", "action": "echo", "args": {"x": 1}},
            {"id": "second", "type": "action", "action": "echo"},
            {"id": "third", "type": "action", "action": "noop"},
        ],
    )
    run = scenario.start("two-echoes", input={"mode": "nightly"})
    assert run["status"] == "pending" and run["current_step"] is None
    result = scenario.tick()
    assert result.steps == 3
    run = scenario.run(run["run_id"])
    assert run["status"] == "completed"
    assert run["output"] is None  # the last step's output (noop)
    assert run["finished_at"] == "2026-01-05T12:00:00Z"
    replay = scenario.api.get(f"/runs/{run['run_id']}/replay").get_json()
    assert replay["stored"]["step_outputs"] == {
        "first": {"x": 1},
        "second": {"mode": "nightly"},
        "third": None,
    }
    assert scenario.types(run["run_id"]) == [
        "run_started",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "run_completed",
    ]
    sequences = [event["sequence"] for event in scenario.events(run["run_id"])]
    assert sequences == list(range(1, 9))


def test_failing_action_is_retried_then_fails_the_run(scenario):
    scenario.deploy(
        "flaky",
        [
            {
                "id": "boom",
                "type": "action",
                "action": "fail",
                "args": {"message": "card declined"},
                "retry": {"max_attempts": 3},
            },
            {"id": "never", "type": "action", "action": "noop"},
        ],
    )
    run = scenario.start("flaky")
    scenario.tick()
    run = scenario.run(run["run_id"])
    assert run["status"] == "failed"
    assert run["error"]["message"] == "card declined"
    assert run["error"]["step"] == "boom" and run["error"]["attempts"] == 3
    events = scenario.events(run["run_id"])
    failures = [e["payload"] for e in events if e["event_type"] == "step_failed"]
    assert [f["attempt"] for f in failures] == [1, 2, 3]
    assert [f["will_retry"] for f in failures] == [True, True, False]
    assert events[-1]["event_type"] == "run_failed"
    assert "never" not in [e["node_id"] for e in events]


def test_retry_backoff_waits_for_the_clock(scenario):
    scenario.deploy(
        "backoff",
        [
            {
                "id": "boom",
                "type": "action",
                "action": "fail",
                "retry": {"max_attempts": 2, "backoff_seconds": 30},
            }
        ],
    )
    run_id = scenario.start("backoff")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "running"
    scenario.advance(seconds=29)
    assert scenario.tick().steps == 0
    scenario.advance(seconds=1)
    assert scenario.tick().steps == 1
    assert scenario.run(run_id)["status"] == "failed"


def test_wait_step_elapses_only_when_the_clock_reaches_it(scenario):
    scenario.deploy(
        "cool",
        [
            {"id": "before", "type": "action", "action": "noop"},
            {"id": "cool-down", "type": "wait", "duration": "PT5M"},
            {"id": "after", "type": "action", "action": "echo", "args": "done"},
        ],
    )
    run_id = scenario.start("cool")["run_id"]
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "waiting" and run["current_step"] == "cool-down"
    scenario.advance(minutes=4, seconds=59)
    assert scenario.tick().deadlines == 0
    assert scenario.run(run_id)["status"] == "waiting"
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    result = scenario.tick()
    assert result.deadlines == 1
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == "done"
    elapsed = next(e for e in scenario.events(run_id) if e["event_type"] == "wait_elapsed")
    started = next(e for e in scenario.events(run_id) if e["event_type"] == "wait_started")
    assert elapsed["payload"]["node_id"] == "cool-down"
    assert elapsed["payload"]["deadline"] == "2026-01-05T12:05:00Z"
    assert elapsed["payload"]["observed_at"] == "2026-01-05T12:05:00Z"
    assert elapsed["payload"]["wait_id"] == started["payload"]["wait_id"]
    assert elapsed["payload"]["sequence"] == elapsed["sequence"]
    assert elapsed["payload"]["event_id"]


def test_signal_step_waits_for_its_signal_and_outputs_its_payload(scenario):
    scenario.deploy(
        "approve",
        [
            {"id": "approval", "type": "signal", "signal": "approve", "timeout_seconds": 3600},
            {"id": "after", "type": "action", "action": "noop"},
        ],
    )
    run_id = scenario.start("approve")["run_id"]
    scenario.tick()
    assert scenario.run(run_id)["status"] == "waiting"
    response = scenario.signal(run_id, "approve", {"by": "alice"})
    assert response.status_code == 202
    body = response.get_json()
    assert body["status"] == "delivered" and body["reason"] is None
    assert body["accepted_at"] == "2026-01-05T12:00:00Z" and body["signal_id"]
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    received = next(e for e in scenario.events(run_id) if e["event_type"] == "signal_received")
    assert received["payload"]["accepted_at"] == "2026-01-05T12:00:00Z"
    assert received["payload"]["deadline"] == "2026-01-05T13:00:00Z"
    assert received["payload"]["payload"] == {"by": "alice"}
    replay = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert replay["stored"]["step_outputs"]["approval"] == {"by": "alice"}


def test_signals_sent_before_their_step_are_kept_and_consumed_in_order(scenario):
    scenario.deploy(
        "two-approvals",
        [
            {"id": "prepare", "type": "action", "action": "noop"},
            {"id": "first", "type": "signal", "signal": "approve"},
            {"id": "second", "type": "signal", "signal": "approve"},
        ],
    )
    run_id = scenario.start("two-approvals")["run_id"]
    statuses = [scenario.signal(run_id, "approve", n).get_json()["status"] for n in (1, 2)]
    assert statuses == ["buffered", "buffered"]
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == 2
    replay = scenario.api.get(f"/runs/{run_id}/replay").get_json()
    assert replay["stored"]["step_outputs"] == {"prepare": None, "first": 1, "second": 2}


def test_signal_nobody_waits_for_is_ignored(scenario):
    scenario.deploy("quiet", [{"id": "w", "type": "wait", "duration": "PT1M"}])
    run_id = scenario.start("quiet")["run_id"]
    scenario.tick()
    body = scenario.signal(run_id, "hello").get_json()
    assert body["status"] == "ignored" and body["reason"] == "not_expected"
    assert "signal_ignored" in scenario.types(run_id)


def test_task_step_is_listed_and_completed_with_an_output(scenario):
    scenario.deploy(
        "review",
        [
            {
                "id": "review",
                "type": "task",
                "title": "Check totals",
                "role": "operator",
                "timeout_seconds": 3600,
                "on_timeout": "continue",
            },
            {"id": "after", "type": "action", "action": "noop"},
        ],
    )
    run_id = scenario.start("review")["run_id"]
    scenario.tick()
    inbox = scenario.api.get("/tasks?status=open").get_json()["items"]
    assert len(inbox) == 1
    task = inbox[0]
    assert task["title"] == "Check totals" and task["run_id"] == run_id
    assert task["due_at"] == "2026-01-05T13:00:00Z" and task["status"] == "open"
    response = scenario.api.post(f"/tasks/{task['id']}/complete", json={"output": {"ok": True}})
    assert response.status_code == 200
    assert response.get_json()["status"] == "completed"
    assert response.get_json()["completed_by"] == "root"
    scenario.tick()
    assert scenario.run(run_id)["status"] == "completed"
    assert scenario.api.get("/tasks?status=open").get_json()["items"] == []
    again = scenario.api.post(f"/tasks/{task['id']}/complete", json={"output": 1})
    assert again.status_code == 409


def test_task_timeout_continue_outputs_null_and_fail_fails_the_run(scenario):
    scenario.deploy(
        "lenient",
        [
            {
                "id": "review",
                "type": "task",
                "title": "t",
                "timeout_seconds": 60,
                "on_timeout": "continue",
            },
            {"id": "after", "type": "action", "action": "echo", "args": "went on"},
        ],
    )
    scenario.deploy(
        "strict", [{"id": "review", "type": "task", "title": "t", "timeout_seconds": 60}]
    )
    lenient = scenario.start("lenient")["run_id"]
    strict = scenario.start("strict")["run_id"]
    scenario.tick()
    scenario.advance(seconds=60)
    assert scenario.tick().deadlines == 2
    assert scenario.run(lenient)["status"] == "completed"
    assert scenario.run(lenient)["output"] == "went on"
    failed = scenario.run(strict)
    assert failed["status"] == "failed" and failed["error"]["type"] == "task_timed_out"
    assert "task_timed_out" in scenario.types(strict)
    statuses = {t["run_id"]: t["status"] for t in scenario.api.get("/tasks").get_json()["items"]}
    assert statuses == {lenient: "timed_out", strict: "timed_out"}


def test_signal_timeout_fail_and_continue(scenario):
    scenario.deploy(
        "sig-continue",
        [
            {
                "id": "s",
                "type": "signal",
                "signal": "go",
                "timeout_seconds": 10,
                "on_timeout": "continue",
            }
        ],
    )
    scenario.deploy(
        "sig-fail", [{"id": "s", "type": "signal", "signal": "go", "timeout_seconds": 10}]
    )
    ok = scenario.start("sig-continue")["run_id"]
    bad = scenario.start("sig-fail")["run_id"]
    scenario.tick()
    scenario.advance(seconds=10)
    scenario.tick()
    assert scenario.run(ok)["status"] == "completed" and scenario.run(ok)["output"] is None
    assert scenario.run(bad)["status"] == "failed"
    timed_out = next(e for e in scenario.events(bad) if e["event_type"] == "signal_timed_out")
    assert timed_out["payload"]["deadline"] == "2026-01-05T12:00:10Z"
    assert timed_out["payload"]["observed_at"] == "2026-01-05T12:00:10Z"
