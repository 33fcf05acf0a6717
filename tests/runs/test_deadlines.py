"""Deadlines: strictly-before wins, the order of due deadlines, timeouts."""

from __future__ import annotations

from datetime import timedelta

from app.context import clock, database
from app.runs import engine
from tests.conftest import FIXED_NOW

MS = timedelta(milliseconds=1)


def _approval(scenario, on_timeout="fail"):
    scenario.deploy(
        "approval",
        [
            {
                "id": "approval",
                "type": "signal",
                "signal": "approve",
                "timeout_seconds": 60,
                "on_timeout": on_timeout,
            },
            {"id": "after", "type": "action", "action": "echo", "args": "approved"},
        ],
    )


def test_signal_accepted_one_millisecond_before_the_deadline_wins(scenario):
    _approval(scenario)
    run_id = scenario.start("approval")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60) - MS)
    body = scenario.signal(run_id, "approve", "yes").get_json()
    assert body["status"] == "delivered"
    assert body["accepted_at"] == "2026-01-05T12:00:59.999000Z"
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    result = scenario.tick()
    assert result.deadlines == 0  # the timeout was consumed by the delivery
    run = scenario.run(run_id)
    assert run["status"] == "completed" and run["output"] == "approved"
    assert "signal_timed_out" not in scenario.types(run_id)


def test_signal_accepted_exactly_at_the_deadline_is_ignored_before_the_scanner_runs(scenario):
    _approval(scenario)
    run_id = scenario.start("approval")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60))
    # No tick has applied the timeout yet: the run still waits, but the signal is too late.
    assert scenario.run(run_id)["status"] == "waiting"
    body = scenario.signal(run_id, "approve", "yes").get_json()
    assert body["status"] == "ignored" and body["reason"] == "too_late"
    ignored = next(e for e in scenario.events(run_id) if e["event_type"] == "signal_ignored")
    assert ignored["payload"]["accepted_at"] == "2026-01-05T12:01:00Z"
    assert ignored["payload"]["deadline"] == "2026-01-05T12:01:00Z"
    assert scenario.tick().deadlines == 1
    run = scenario.run(run_id)
    assert run["status"] == "failed" and run["error"]["type"] == "signal_timed_out"
    assert scenario.signal(run_id, "approve").status_code == 409


def test_signal_after_a_continued_timeout_is_too_late(scenario):
    scenario.deploy(
        "then-wait",
        [
            {
                "id": "approval",
                "type": "signal",
                "signal": "approve",
                "timeout_seconds": 60,
                "on_timeout": "continue",
            },
            {"id": "rest", "type": "wait", "duration": "PT1H"},
        ],
    )
    run_id = scenario.start("then-wait")["run_id"]
    scenario.tick()
    scenario.advance(seconds=61)
    scenario.tick()
    assert scenario.run(run_id)["current_step"] == "rest"
    body = scenario.signal(run_id, "approve").get_json()
    assert body["status"] == "ignored" and body["reason"] == "too_late"


def test_task_completed_one_millisecond_before_wins_and_at_the_deadline_is_refused(scenario):
    scenario.deploy(
        "review", [{"id": "review", "type": "task", "title": "Check", "timeout_seconds": 60}]
    )
    early = scenario.start("review")["run_id"]
    late = scenario.start("review")["run_id"]
    scenario.tick()
    tasks = {t["run_id"]: t["id"] for t in scenario.api.get("/tasks").get_json()["items"]}
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60) - MS)
    assert (
        scenario.api.post(f"/tasks/{tasks[early]}/complete", json={"output": 1}).status_code == 200
    )
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60))
    refused = scenario.api.post(f"/tasks/{tasks[late]}/complete", json={"output": 1})
    assert refused.status_code == 409
    assert refused.get_json()["error"]["details"]["status"] == "too_late"
    scenario.tick()
    assert scenario.run(early)["status"] == "completed"
    assert scenario.run(late)["status"] == "failed"


def test_deadlines_due_together_apply_in_spec_order(scenario):
    scenario.deploy(
        "timeboxed", [{"id": "long", "type": "wait", "duration": "PT10M"}], timeout_seconds=60
    )
    scenario.deploy(
        "signal",
        [
            {
                "id": "s-approve",
                "type": "signal",
                "signal": "go",
                "timeout_seconds": 60,
                "on_timeout": "continue",
            }
        ],
    )
    scenario.deploy(
        "task",
        [
            {
                "id": "t-review",
                "type": "task",
                "title": "t",
                "timeout_seconds": 60,
                "on_timeout": "continue",
            }
        ],
    )
    scenario.deploy("wait-b", [{"id": "b-wait", "type": "wait", "duration": "PT1M"}])
    scenario.deploy("wait-a", [{"id": "a-wait", "type": "wait", "duration": "PT1M"}])
    scenario.deploy("wait-z", [{"id": "z-wait", "type": "wait", "duration": "PT30S"}])
    runs = {
        name: scenario.start(name)["run_id"]
        for name in ("wait-b", "wait-a", "wait-z", "task", "signal", "timeboxed")
    }
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(minutes=1))
    result = scenario.tick(work=False)
    assert result.deadlines == 6
    applied = {}
    for name, run_id in runs.items():
        for event in scenario.events(run_id):
            if event["event_type"] in (
                "run_timed_out",
                "signal_timed_out",
                "task_timed_out",
                "wait_elapsed",
            ):
                applied[event["id"]] = name
    # Run timeout, then signal and task timeouts (by due time, node id), then waits by
    # (due time, node id): z-wait was due first, a-wait and b-wait tie on time.
    assert [applied[i] for i in sorted(applied)] == [
        "timeboxed",
        "signal",
        "task",
        "wait-z",
        "wait-a",
        "wait-b",
    ]
    assert scenario.run(runs["timeboxed"])["status"] == "timed_out"
    assert "wait_elapsed" not in scenario.types(runs["timeboxed"])


def test_run_timeout_beats_a_wait_due_at_the_same_instant(scenario):
    scenario.deploy(
        "tie",
        [
            {"id": "pause", "type": "wait", "duration": "PT5M"},
            {"id": "after", "type": "action", "action": "noop"},
        ],
        timeout_seconds=300,
    )
    run_id = scenario.start("tie")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    result = scenario.tick()
    assert result.deadlines == 1 and result.steps == 0
    run = scenario.run(run_id)
    assert run["status"] == "timed_out" and run["current_step"] == "pause"
    types = scenario.types(run_id)
    assert types[-1] == "run_timed_out" and "wait_elapsed" not in types
    timed_out = scenario.events(run_id)[-1]["payload"]
    assert timed_out == {"deadline": "2026-01-05T12:05:00Z", "observed_at": "2026-01-05T12:05:00Z"}


def test_the_earliest_of_the_definition_and_run_timeouts_wins(scenario):
    scenario.deploy(
        "slow", [{"id": "pause", "type": "wait", "duration": "PT1H"}], timeout_seconds=3600
    )
    run_id = scenario.start("slow", timeout_seconds=90)["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=90) - MS)
    scenario.tick()
    assert scenario.run(run_id)["status"] == "waiting"
    scenario.set_clock(FIXED_NOW + timedelta(seconds=90))
    scenario.tick()
    assert scenario.run(run_id)["status"] == "timed_out"


def test_nothing_reaches_a_run_after_its_timeout_even_before_the_scanner_runs(app, scenario):
    scenario.deploy(
        "boxed",
        [
            {"id": "go", "type": "signal", "signal": "go"},
            {"id": "review", "type": "task", "title": "Check"},
        ],
        timeout_seconds=60,
    )
    signalled, reviewed = (scenario.start("boxed")["run_id"] for _ in range(2))
    scenario.tick()
    assert scenario.signal(reviewed, "go").get_json()["status"] == "delivered"
    scenario.tick()
    task = scenario.api.get(f"/tasks?run_id={reviewed}").get_json()["items"][0]
    # No tick after the deadline: the runs still read as waiting, but they are over.
    scenario.set_clock(FIXED_NOW + timedelta(minutes=5))
    before = {run_id: len(scenario.events(run_id)) for run_id in (signalled, reviewed)}
    late = scenario.signal(signalled, "go")
    assert late.status_code == 409, late.get_json()
    error = late.get_json()["error"]
    assert error["details"]["status"] == "timed_out" and "12:01:00Z" in error["message"]
    refused = scenario.api.post(f"/tasks/{task['id']}/complete", json={"output": 1})
    assert refused.status_code == 409
    assert refused.get_json()["error"]["details"]["status"] == "timed_out"
    assert {run_id: len(scenario.events(run_id)) for run_id in before} == before
    scenario.tick()
    for run_id in (signalled, reviewed):
        run = scenario.run(run_id)
        assert run["status"] == "timed_out", run
        assert scenario.types(run_id)[-1] == "run_timed_out"
    closed = scenario.api.get(f"/tasks?run_id={reviewed}").get_json()["items"]
    assert [t["status"] for t in closed] == ["cancelled"]


def test_an_action_finishing_after_the_run_timeout_loses_to_it(app, scenario):
    scenario.deploy(
        "short", [{"id": "work", "type": "action", "action": "echo", "args": 1}], timeout_seconds=30
    )
    run_id = scenario.start("short")["run_id"]
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    claim = engine.claim_next(database(app), clock(app), settings)
    assert isinstance(claim, engine.Claim) and claim.context.step_id == "work"
    # The action takes 45 s: its lease (60 s) still holds, the run's 30 s do not.
    scenario.set_clock(FIXED_NOW + timedelta(seconds=45))
    outcome = engine.execute(claim)
    assert engine.commit_outcome(database(app), clock(app), claim, outcome) is False
    run = scenario.run(run_id)
    assert run["status"] == "timed_out" and run["output"] is None, run
    types = scenario.types(run_id)
    assert types[-1] == "run_timed_out" and "step_completed" not in types
    timed_out = scenario.events(run_id)[-1]["payload"]
    assert timed_out == {"deadline": "2026-01-05T12:00:30Z", "observed_at": "2026-01-05T12:00:45Z"}
    assert scenario.tick().deadlines == 0


def test_cancel_during_a_wait_stops_the_run_and_its_timer(scenario):
    scenario.deploy(
        "sleepy",
        [
            {"id": "pause", "type": "wait", "duration": "PT5M"},
            {"id": "after", "type": "action", "action": "noop"},
        ],
    )
    run_id = scenario.start("sleepy")["run_id"]
    scenario.tick()
    response = scenario.api.post(f"/runs/{run_id}/cancel", json={"reason": "not needed"})
    assert response.status_code == 200
    assert response.get_json()["status"] == "cancelled"
    scenario.advance(minutes=10)
    result = scenario.tick()
    assert result.deadlines == 0 and result.steps == 0
    assert scenario.types(run_id)[-2:] == ["cancel_requested", "run_cancelled"]
    again = scenario.api.post(f"/runs/{run_id}/cancel", json={})
    assert again.status_code == 409
    assert again.get_json()["error"]["details"]["status"] == "cancelled"
    assert "cancelled" in again.get_json()["error"]["message"]


def test_a_moved_back_clock_does_not_wake_a_wait(scenario):
    scenario.deploy("wait", [{"id": "w", "type": "wait", "duration": "PT1M"}])
    run_id = scenario.start("wait")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW - timedelta(hours=1))
    assert scenario.tick().deadlines == 0
    scenario.set_clock(FIXED_NOW + timedelta(minutes=1) - MS)
    assert scenario.tick().deadlines == 0
    assert scenario.run(run_id)["status"] == "waiting"


def test_an_end_or_a_resolution_after_the_run_timeout_does_not_replace_it(app, scenario):
    scenario.deploy("waits", [{"id": "go", "type": "signal", "signal": "go"}], timeout_seconds=60)
    scenario.deploy(
        "stuck",
        [{"id": "charge", "type": "action", "action": "fail"}],
        timeout_seconds=60,
        on_step_failure="incident",
    )
    cancelled, terminated = (scenario.start("waits")["run_id"] for _ in range(2))
    stuck = scenario.start("stuck")["run_id"]
    scenario.tick()
    incident = scenario.api.get(f"/runs/{stuck}/incidents").get_json()["items"][0]
    scenario.set_clock(FIXED_NOW + timedelta(seconds=60))
    for path in (
        f"/runs/{cancelled}/cancel",
        f"/runs/{terminated}/terminate",
        f"/runs/{stuck}/incidents/{incident['id']}/resolve",
    ):
        body = {"action": "skip"} if "resolve" in path else {}
        refused = scenario.api.post(path, json=body)
        assert refused.status_code == 409, (path, refused.get_json())
        assert refused.get_json()["error"]["details"]["status"] == "timed_out"
    scenario.tick(work=False)
    for run_id in (cancelled, terminated, stuck):
        assert scenario.run(run_id)["status"] == "timed_out"


def test_a_step_due_after_the_run_timeout_never_starts(app, scenario):
    scenario.deploy(
        "late", [{"id": "work", "type": "action", "action": "echo", "args": 1}], timeout_seconds=30
    )
    run_id = scenario.start("late")["run_id"]
    scenario.set_clock(FIXED_NOW + timedelta(seconds=31))
    # A worker comes by before the scanner: it applies the timeout instead of the step.
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    assert engine.claim_next(database(app), clock(app), settings) is False
    run = scenario.run(run_id)
    assert run["status"] == "timed_out", run
    assert "step_started" not in scenario.types(run_id)


def _waits_for(step_id, seconds, on_timeout="continue"):
    return {
        "id": step_id,
        "type": "signal",
        "signal": "x",
        "timeout_seconds": seconds,
        "on_timeout": on_timeout,
    }


def test_a_signal_passes_over_a_branch_past_its_deadline_to_one_still_waiting_in_time(scenario):
    """Two branches wait for the same name; the first one's deadline has passed, unscanned.
    The signal goes to the second as it would after a scan: how late the ticker runs must not
    decide (it was ignored as too late for the first branch)."""
    branches = [
        {"id": "p", "steps": [_waits_for("p1", 600)]},
        {"id": "q", "steps": [_waits_for("q1", 3600)]},
    ]
    scenario.deploy("two", [{"id": "fan", "type": "parallel", "branches": branches}])
    unscanned = scenario.start("two")["run_id"]
    scanned = scenario.start("two")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=600))
    body = scenario.signal(unscanned, "x", 2).get_json()
    assert body["status"] == "delivered"
    scenario.tick()
    assert scenario.signal(scanned, "x", 1).get_json()["status"] == "delivered"
    for run_id in (unscanned, scanned):
        assert scenario.run(run_id)["status"] == "completed"
        received = [e for e in scenario.events(run_id) if e["event_type"] == "signal_received"]
        assert [e["node_id"] for e in received] == ["q1"]
        assert "signal_ignored" not in scenario.types(run_id)


def test_a_signal_for_a_later_step_is_kept_when_the_current_one_passed_its_deadline(scenario):
    scenario.deploy("seq", [_waits_for("s1", 600), _waits_for("s2", 3600)])
    run_id = scenario.start("seq")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=600))
    # s1 still waits (no scan yet), but its deadline has passed and it continues: s2 takes it.
    assert scenario.signal(run_id, "x", "late for s1").get_json()["status"] == "buffered"
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    received = [e for e in scenario.events(run_id) if e["event_type"] == "signal_received"]
    assert [(e["node_id"], e["payload"]["payload"]) for e in received] == [("s2", "late for s1")]


def test_a_signal_past_a_deadline_that_fails_the_run_is_too_late_even_if_a_later_step_waits(
    scenario,
):
    scenario.deploy("seq-fail", [_waits_for("s1", 600, "fail"), _waits_for("s2", 3600)])
    run_id = scenario.start("seq-fail")["run_id"]
    scenario.tick()
    scenario.set_clock(FIXED_NOW + timedelta(seconds=600))
    body = scenario.signal(run_id, "x").get_json()
    assert body["status"] == "ignored" and body["reason"] == "too_late"
    scenario.tick()
    assert scenario.run(run_id)["status"] == "failed"


def _each_way(scenario, name, at, signal):
    """Two runs of `name`: one signalled at `at` before any scan, one after the scan at `at`.
    Returns (answer before the scan, answer after it, the two runs)."""
    before, after = scenario.start(name)["run_id"], scenario.start(name)["run_id"]
    scenario.tick()
    scenario.set_clock(at)
    unscanned = scenario.signal(before, signal).get_json()["status"]
    scenario.tick()
    scanned = scenario.signal(after, signal).get_json()["status"]
    scenario.tick()
    return unscanned, scanned, (before, after)


def _received(scenario, run_id):
    return [e["node_id"] for e in scenario.events(run_id) if e["event_type"] == "signal_received"]


def _both_ways(scenario, name, branches, **extra):
    """`branches` deployed under one parallel step; `_each_way` signals `x` 10 s after the start.
    Returns the two answers, where the signal landed in each run, and the runs."""
    scenario.deploy(name, [{"id": "p", "type": "parallel", "branches": branches}], **extra)
    unscanned, scanned, runs = _each_way(scenario, name, FIXED_NOW + timedelta(seconds=10), "x")
    return (unscanned, scanned), [_received(scenario, run_id) for run_id in runs], runs


def test_a_signal_waits_for_the_step_the_scan_enters_before_any_later_branch(scenario):
    """The step after a passed-over one is entered by the scan and comes first in definition
    order: the signal went to the other branch when no scan had run yet."""
    branches = [
        {
            "id": "b1",
            "steps": [_waits_for("s1", 10), {"id": "s1b", "type": "signal", "signal": "x"}],
        },
        {"id": "b2", "steps": [_waits_for("s2", 100)]},
    ]
    answers, landed, runs = _both_ways(scenario, "chain", branches)
    assert answers == ("buffered", "delivered")
    assert landed == [["s1b"], ["s1b"]]
    assert [scenario.run(run_id)["status"] for run_id in runs] == ["waiting", "waiting"]


def test_a_signal_waits_for_the_step_after_a_wait_that_has_elapsed_unscanned(scenario):
    branches = [
        {
            "id": "b1",
            "steps": [
                {"id": "pause", "type": "wait", "duration": "PT10S"},
                {"id": "s1", "type": "signal", "signal": "x"},
            ],
        },
        {"id": "b2", "steps": [_waits_for("s2", 100)]},
    ]
    answers, landed, runs = _both_ways(scenario, "paused", branches)
    assert answers == ("buffered", "delivered")
    assert landed == [["s1"], ["s1"]]


def test_during_an_incident_a_signal_passes_over_a_step_whose_failure_the_scan_holds(scenario):
    branches = [
        {"id": "a", "steps": [{"id": "f", "type": "action", "action": "fail", "args": {}}]},
        {"id": "b1", "steps": [_waits_for("s1", 10, "fail")]},
        {"id": "b2", "steps": [_waits_for("s2", 100)]},
    ]
    answers, landed, runs = _both_ways(scenario, "held", branches, on_step_failure="incident")
    assert [scenario.run(run_id)["status"] for run_id in runs] == ["suspended", "suspended"]
    assert answers == ("delivered", "delivered")
    assert landed == [["s2"], ["s2"]]


def test_a_signal_waits_for_a_branch_the_scan_starts_at_once(scenario):
    opened = {
        "id": "q",
        "type": "parallel",
        "branches": [{"id": "c1", "steps": [{"id": "s1b", "type": "signal", "signal": "x"}]}],
    }
    before = {"id": "s1", "type": "signal", "signal": "y", "timeout_seconds": 10}
    before["on_timeout"] = "continue"
    branches = [
        {"id": "b1", "steps": [before, opened]},
        {"id": "b2", "steps": [_waits_for("s2", 100)]},
    ]
    answers, landed, runs = _both_ways(scenario, "nested", branches)
    assert answers == ("buffered", "delivered")
    assert landed == [["s1b"], ["s1b"]]


def test_a_signal_is_too_late_once_any_timeout_that_fails_the_run_is_due(scenario):
    """Another branch's failing timeout is due, unscanned: the scan would fail the run, so no
    step may take the signal (it was delivered to the first branch, which then completed)."""
    branches = [
        {"id": "b", "steps": [{"id": "sb", "type": "signal", "signal": "x"}]},
        {
            "id": "a",
            "steps": [{"id": "ta", "type": "task", "title": "Check", "timeout_seconds": 10}],
        },
    ]
    scenario.deploy("doomed", [{"id": "p", "type": "parallel", "branches": branches}])
    at = FIXED_NOW + timedelta(seconds=10)
    before, after = scenario.start("doomed")["run_id"], scenario.start("doomed")["run_id"]
    scenario.tick()
    scenario.set_clock(at)
    body = scenario.signal(before, "x").get_json()
    assert body["status"] == "ignored" and body["reason"] == "too_late"
    scenario.tick()
    assert scenario.signal(after, "x").status_code == 409
    for run_id in (before, after):
        assert scenario.run(run_id)["status"] == "failed"
        assert _received(scenario, run_id) == []
    # One millisecond earlier the task's deadline is not due yet: the signal is delivered.
    early = scenario.start("doomed")["run_id"]
    scenario.tick()
    scenario.set_clock(at + timedelta(seconds=10) - MS)
    assert scenario.signal(early, "x").get_json()["status"] == "delivered"
