"""Workers: leases, terminate and cancel during an action, lost workers, queues, the pool."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

from sqlalchemy import select

from app.context import clock, database
from app.db import Run
from app.runs import engine
from app.runs.pool import WorkerPool
from tests.conftest import FIXED_NOW
from tests.support import probe_actions  # noqa: F401 - registers the `probe` action

LEASE = timedelta(seconds=engine.DEFAULT_LEASE_SECONDS)


def _settings(name="test-worker", queue=engine.ANY_QUEUE):
    return engine.WorkerSettings(name=name, queue=queue)


def _claim(app, settings=None):
    claim = engine.claim_next(database(app), clock(app), settings or _settings())
    assert isinstance(claim, engine.Claim)
    return claim


def _finish(app, claim):
    return engine.commit_outcome(database(app), clock(app), claim, engine.execute(claim))


def _deploy_pair(scenario):
    scenario.deploy(
        "pair",
        [
            {"id": "first", "type": "action", "action": "echo", "args": 1},
            {"id": "second", "type": "action", "action": "echo", "args": 2},
        ],
    )


def test_terminate_during_an_action_discards_its_result(app, scenario):
    _deploy_pair(scenario)
    run_id = scenario.start("pair")["run_id"]
    claim = _claim(app)
    assert scenario.run(run_id)["status"] == "running"
    response = scenario.api.post(f"/runs/{run_id}/terminate", json={"reason": "stop now"})
    assert response.status_code == 200 and response.get_json()["status"] == "terminated"
    assert _finish(app, claim) is False
    assert scenario.tick().steps == 0
    types = scenario.types(run_id)
    assert types == ["run_started", "step_started", "run_terminated"]
    payload = scenario.events(run_id)[-1]["payload"]
    assert payload["reason"] == "stop now" and payload["command_context"]["reason"] == "stop now"
    again = scenario.api.post(f"/runs/{run_id}/terminate", json={})
    assert (
        again.status_code == 409 and again.get_json()["error"]["details"]["status"] == "terminated"
    )


def test_cancel_during_an_action_waits_for_the_step_boundary(app, scenario):
    _deploy_pair(scenario)
    run_id = scenario.start("pair")["run_id"]
    claim = _claim(app)
    response = scenario.api.post(f"/runs/{run_id}/cancel", json={"reason": "enough"})
    assert response.status_code == 200 and response.get_json()["status"] == "running"
    assert _finish(app, claim) is True
    run = scenario.run(run_id)
    assert run["status"] == "cancelled"
    assert scenario.types(run_id) == [
        "run_started",
        "step_started",
        "cancel_requested",
        "step_completed",
        "run_cancelled",
    ]
    # The caller's reason and who asked survive the wait for the boundary.
    asked, ended = (e["payload"] for e in scenario.events(run_id)[2::2])
    assert ended == {
        "reason": "enough",
        "requested_at": "2026-01-05T12:00:00Z",
        "command_context": asked["command_context"],
    }
    assert ended["command_context"]["source"] == "api"
    assert ended["command_context"]["reason"] == "enough"
    assert scenario.tick().steps == 0


def test_a_worker_that_dies_mid_step_loses_its_lease_and_the_step_runs_again(
    app, scenario, tmp_path
):
    log = tmp_path / "probe.log"
    scenario.deploy(
        "probed", [{"id": "only", "type": "action", "action": "probe", "args": {"log": str(log)}}]
    )
    run_id = scenario.start("probed")["run_id"]
    dead = _claim(app, _settings("doomed"))  # claimed, then the worker "dies": never commits
    scenario.set_clock(FIXED_NOW + LEASE - timedelta(milliseconds=1))
    assert scenario.tick().steps == 0  # the lease still holds: nobody else may run the step
    scenario.set_clock(FIXED_NOW + LEASE)
    result = scenario.tick()
    assert result.steps == 1
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    executions = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(executions) == 1 and executions[0]["attempt"] == 1
    # The dead worker's late result (if it ever came) is discarded: the run completed once.
    assert _finish(app, dead) is False
    types = scenario.types(run_id)
    assert types.count("run_completed") == 1 and types.count("step_completed") == 1
    failed = next(e for e in scenario.events(run_id) if e["event_type"] == "step_failed")
    assert failed["payload"]["error"]["type"] == "lease_expired"
    assert failed["payload"]["will_retry"] is True


def test_a_worker_may_also_take_over_an_expired_lease_directly(app, scenario):
    _deploy_pair(scenario)
    run_id = scenario.start("pair")["run_id"]
    _claim(app, _settings("doomed"))
    scenario.set_clock(FIXED_NOW + LEASE)
    # No tick ran: the next claim itself releases the expired lease first.
    while engine.work_once(database(app), clock(app), _settings("heir")):
        pass
    assert scenario.run(run_id)["status"] == "completed"
    assert scenario.types(run_id).count("step_failed") == 1


def test_a_lapsed_claim_is_told_apart_from_the_same_workers_next_claim(app, scenario):
    scenario.deploy("once", [{"id": "only", "type": "action", "action": "echo", "args": 1}])
    run_id = scenario.start("once")["run_id"]
    stale = _claim(app, _settings("same"))
    scenario.set_clock(FIXED_NOW + LEASE)
    fresh = _claim(app, _settings("same"))  # the same worker name takes the lapsed step again
    assert fresh.owner != stale.owner
    assert _finish(app, stale) is False  # the first claim's result is not the second's
    assert _finish(app, fresh) is True
    assert scenario.run(run_id)["status"] == "completed"
    assert scenario.types(run_id).count("step_completed") == 1


def test_lease_owners_differ_in_a_forked_process():
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what its next lease is called
        os.write(writer, engine.lease_owner("w").encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    child = os.read(reader, 200).decode()
    os.close(reader)
    parent = engine.lease_owner("w")
    assert child.startswith("w:") and parent.startswith("w:")
    assert child != parent  # the counter alone would give both the same next value
    assert len({engine.lease_owner("w") for _ in range(1000)}) == 1000


def test_queues_route_runs_to_their_workers(app, scenario):
    _deploy_pair(scenario)
    gpu = scenario.start("pair", queue="gpu")["run_id"]
    plain = scenario.start("pair")["run_id"]
    db, clk = database(app), clock(app)
    while engine.work_once(db, clk, _settings("default-worker", queue=None)):
        pass
    assert scenario.run(plain)["status"] == "completed"
    assert scenario.run(gpu)["status"] == "pending"
    while engine.work_once(db, clk, _settings("gpu-worker", queue="gpu")):
        pass
    assert scenario.run(gpu)["status"] == "completed" and scenario.run(gpu)["queue"] == "gpu"


def test_an_action_that_raises_or_returns_no_json_fails_its_step(app, scenario):
    from app.runs.actions import action

    @action("test-returns-set")
    def returns_set(ctx):
        return {1, 2}

    @action("test-raises")
    def raises(ctx):
        raise KeyError("missing")

    scenario.deploy("bad-output", [{"id": "s", "type": "action", "action": "test-returns-set"}])
    scenario.deploy("raises", [{"id": "s", "type": "action", "action": "test-raises"}])
    bad = scenario.start("bad-output")["run_id"]
    raised = scenario.start("raises")["run_id"]
    scenario.tick()
    assert scenario.run(bad)["error"]["type"] == "output_not_json"
    assert scenario.run(raised)["error"]["type"] == "KeyError"


def test_worker_pool_threads_complete_runs_each_step_once(app, scenario, tmp_path):
    log = tmp_path / "probe.log"
    scenario.deploy(
        "probed",
        [
            {"id": f"s{i}", "type": "action", "action": "probe", "args": {"log": str(log)}}
            for i in range(3)
        ],
    )
    run_ids = [scenario.start("probed")["run_id"] for _ in range(8)]
    pool = WorkerPool(database(app), clock(app), size=3, poll_seconds=0.05).start()
    try:
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:
            with database(app).session() as session:
                left = session.scalar(select(Run.id).where(Run.status != "completed").limit(1))
            if left is None:
                break
            time.sleep(0.05)
    finally:
        pool.stop()
    assert all(scenario.run(r)["status"] == "completed" for r in run_ids)
    executions = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((e["run"], e["step"]) for e in executions) == sorted(
        (r, f"s{i}") for r in run_ids for i in range(3)
    )


def test_an_action_whose_output_or_error_no_database_can_store_fails_alone(app, scenario):
    # NUL (no PostgreSQL text holds it) or a lone surrogate (not Unicode text) in what an action
    # returned or raised failed the commit of the worker's whole batch, every time it was
    # claimed again: the same actions ran over and over and every run of the batch stood still.
    from app.runs.actions import action

    @action("test-returns-nul")
    def returns_nul(ctx):
        return {"report": "a\x00b"}

    @action("test-returns-surrogate-key")
    def returns_surrogate_key(ctx):
        return {"k\ud800": 1}

    @action("test-raises-nul")
    def raises_nul(ctx):
        raise ValueError("bad \x00 byte \udcff")

    for name in ("test-returns-nul", "test-returns-surrogate-key", "test-raises-nul"):
        scenario.deploy(name, [{"id": "s", "type": "action", "action": name}])
    _deploy_pair(scenario)
    nul = scenario.start("test-returns-nul")["run_id"]
    key = scenario.start("test-returns-surrogate-key")["run_id"]
    raised = scenario.start("test-raises-nul")["run_id"]
    fine = scenario.start("pair")["run_id"]
    scenario.tick()
    assert scenario.run(fine)["status"] == "completed"
    for run_id, where in ((nul, ["report"]), (key, ["k\ufffd"])):
        run = scenario.run(run_id)
        assert run["status"] == "failed", run
        assert run["error"]["type"] == "output_not_storable"
        assert run["error"]["path"] == where
    run = scenario.run(raised)
    assert run["status"] == "failed" and run["error"]["type"] == "ValueError"
    assert run["error"]["message"] == "bad \ufffd byte \ufffd"
    # Each action ran once: the runs' histories hold one attempt each.
    for run_id in (nul, key, raised):
        assert scenario.types(run_id).count("step_started") == 1


def test_an_output_json_cannot_hold_as_returned_fails_its_step_alone(app, scenario):
    # Each of these got past the output checks and then failed in the worker (a key that is
    # not a string; nesting that exhausted the encoder) or in the commit of the whole batch
    # (NaN and Infinity, which PostgreSQL's json refuses, and SQLite stored as invalid JSON):
    # the batch's results were lost and its steps ran again at every lease, attempt 1 forever,
    # healthy steps of the same batch with them. sys.exit() or KeyboardInterrupt in an action
    # ended the worker's thread instead of failing the step.
    from app.runs.actions import action

    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    returns = {
        "int-key": ({1: "a"}, "output_not_json"),
        "deep": (deep, "output_not_json"),
        "nan": ({"v": float("nan")}, "output_not_json"),
        "inf": ([float("-inf")], "output_not_json"),
    }
    for name, (value, _) in returns.items():
        action(f"test-returns-{name}")(lambda ctx, value=value: value)

    @action("test-exits")
    def exits(ctx):
        raise SystemExit(3)

    @action("test-interrupts")
    def interrupts(ctx):
        raise KeyboardInterrupt

    class Boom(BaseException):
        pass

    @action("test-generator-exit")
    def generator_exit(ctx):
        raise GeneratorExit

    @action("test-base-exception")
    def base_exception(ctx):
        raise Boom("not an Exception")

    names = [f"test-returns-{name}" for name in returns]
    names += ["test-exits", "test-interrupts", "test-generator-exit", "test-base-exception"]
    for name in names:
        scenario.deploy(name, [{"id": "s", "type": "action", "action": name}])
    _deploy_pair(scenario)
    fine = [scenario.start("pair")["run_id"] for _ in range(3)]
    runs = {name: scenario.start(name)["run_id"] for name in names}
    scenario.tick()
    assert [scenario.run(run_id)["status"] for run_id in fine] == ["completed"] * 3
    for name, (_, kind) in returns.items():
        run = scenario.run(runs[f"test-returns-{name}"])
        assert (run["status"], run["error"]["type"]) == ("failed", kind), run
    assert scenario.run(runs["test-returns-int-key"])["error"]["path"] == []
    assert "not a string" in scenario.run(runs["test-returns-int-key"])["error"]["message"]
    assert "64 levels" in scenario.run(runs["test-returns-deep"])["error"]["message"]
    exited = scenario.run(runs["test-exits"])
    assert (exited["status"], exited["error"]["type"]) == ("failed", "SystemExit")
    interrupted = scenario.run(runs["test-interrupts"])
    assert (interrupted["status"], interrupted["error"]["type"]) == ("failed", "KeyboardInterrupt")
    for name, kind in (("test-generator-exit", "GeneratorExit"), ("test-base-exception", "Boom")):
        run = scenario.run(runs[name])
        assert (run["status"], run["error"]["type"]) == ("failed", kind), run
    for run_id in [*fine, *runs.values()]:
        assert scenario.types(run_id).count("step_started") == scenario.types(run_id).count(
            "step_completed"
        ) + scenario.types(run_id).count("step_failed")


def test_the_output_limit_counts_compact_utf8_as_the_input_limit_does(app, scenario):
    # An echo of an input the API had just accepted failed as output_too_large: outputs were
    # measured with spaces after separators and non-ASCII as six-byte escapes (\u00e9 for é).
    def echo(args: object = None) -> list[dict[str, object]]:
        step = {"id": "e", "type": "action", "action": "echo"}
        return [step if args is None else {**step, "args": args}]

    scenario.deploy("echo-in", echo())
    scenario.deploy("echo-args", echo("é" * 100_000))
    numbers = scenario.start("echo-in", input={"l": [1] * 100_000})["run_id"]
    accents = scenario.start("echo-args")["run_id"]
    scenario.tick()
    assert scenario.run(numbers)["status"] == "completed", scenario.run(numbers)
    assert scenario.run(accents)["status"] == "completed", scenario.run(accents)
    scenario.deploy("too-big", echo("é" * 140_000))
    big = scenario.start("too-big")["run_id"]
    scenario.tick()
    error = scenario.run(big)["error"]
    assert error["type"] == "output_too_large"
    assert error["message"] == "280002 bytes; the limit is 262144"
    # The input's limit counts the same way: 100,000 é are 200,002 bytes as UTF-8 (600,002
    # as \u00e9 escapes, which the limit counted before).
    scenario.deploy("takes-input", [{"id": "e", "type": "action", "action": "noop"}])
    assert scenario.start("takes-input", input={"t": "é" * 100_000})["status"] == "pending"


def test_a_result_the_database_refuses_fails_its_step_and_the_batch_still_commits(
    app, scenario, monkeypatch
):
    # Whatever the checks miss, one result the database refuses must not sink the results of
    # every step claimed with it: they were all lost and ran again at the next lease, the
    # refused one forever. (The refusal is injected: the checks catch every known cause.)
    from sqlalchemy.exc import DataError

    from app.runs.actions import action

    action("test-returns-poison")(lambda ctx: {"poison": 1})
    real = engine.complete_step

    def refusing(session, run, frame, now, output):
        if output == {"poison": 1}:
            raise DataError("INSERT ...", {}, ValueError("value too long for the column\nmore"))
        return real(session, run, frame, now, output)

    monkeypatch.setattr(engine, "complete_step", refusing)
    scenario.deploy("poison", [{"id": "s", "type": "action", "action": "test-returns-poison"}])
    _deploy_pair(scenario)
    fine = [scenario.start("pair")["run_id"] for _ in range(2)]
    poisoned = scenario.start("poison")["run_id"]
    fine.append(scenario.start("pair")["run_id"])
    db, clk = database(app), clock(app)
    while engine.work_once(db, clk, _settings("w")):
        pass
    assert [scenario.run(run_id)["status"] for run_id in fine] == ["completed"] * 3
    run = scenario.run(poisoned)
    assert run["status"] == "failed"
    assert run["error"]["type"] == "result_not_storable"
    assert run["error"]["message"] == "value too long for the column"
    for run_id in [*fine, poisoned]:
        started = scenario.types(run_id).count("step_started")
        assert started == (2 if run_id in fine else 1), scenario.types(run_id)


def test_a_run_whose_step_the_database_refuses_is_failed_and_the_others_are_claimed(
    app, scenario, monkeypatch
):
    # Claimed oldest first in one transaction, a run whose next step the database refused
    # (a branch path longer than its column, before it was widened) failed every claim of
    # every worker, and every run behind it waited for good. (The refusal is injected.)
    from sqlalchemy.exc import DataError

    real = engine._lease

    def refusing(session, run, frame, now, settings):
        if run.run_id == "poisoned":
            raise DataError("INSERT ...", {}, ValueError("value too long for type varchar(1024)"))
        return real(session, run, frame, now, settings)

    monkeypatch.setattr(engine, "_lease", refusing)
    _deploy_pair(scenario)
    poisoned = scenario.start("pair", run_id="poisoned")["run_id"]
    fine = [scenario.start("pair")["run_id"] for _ in range(3)]
    db, clk = database(app), clock(app)
    for _ in range(20):
        if not engine.work_once(db, clk, _settings("w")):
            break
    assert [scenario.run(run_id)["status"] for run_id in fine] == ["completed"] * 3
    run = scenario.run(poisoned)
    assert run["status"] == "failed", run
    assert run["error"]["type"] == "claim_failed"
    assert run["error"]["message"] == "value too long for type varchar(1024)"
    assert "step_started" not in scenario.types(poisoned)
    for run_id in fine:
        assert scenario.types(run_id).count("step_started") == 2
