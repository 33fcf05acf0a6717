"""Worker processes and parallel branches: a killed worker's branch step runs again and nothing
else twice; a long action keeps its lease by heartbeats and runs exactly once."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.context import database
from app.db import RunBranch
from app.runs.engine import DEFAULT_LEASE_SECONDS
from tests.conftest import FIXED_NOW
from tests.runs.test_processes import _spawn, _status, _stop, _wait_for
from tests.support import probe_actions  # noqa: F401 - registers `probe` for deploy validation

pytestmark = pytest.mark.slow


def _executions(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_worker_killed_mid_branch_loses_nothing_and_doubles_nothing(
    app, scenario, db_url, tmp_path
):
    log = tmp_path / "probe.log"
    probe = {"type": "action", "action": "probe", "args": {"log": str(log)}}
    scenario.deploy(
        "fanned",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {
                        "id": "a",
                        "steps": [
                            {"id": "a-probe", **probe},
                            {"id": "a-noop", "type": "action", "action": "noop"},
                        ],
                    },
                    {"id": "b", "steps": [{"id": "b-probe", **probe}]},
                ],
            }
        ],
    )
    worker = _spawn(db_url, tmp_path / "worker.err", threads=1, block=True)
    try:
        run_id = scenario.start("fanned")["run_id"]
        _wait_for(lambda: log.exists() and "blocking" in log.read_text())
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert scenario.run(run_id)["status"] == "running"
    assert scenario.tick().steps == 1  # only b's probe: a's lease still holds
    scenario.set_clock(FIXED_NOW + timedelta(seconds=DEFAULT_LEASE_SECONDS))
    scenario.tick()
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    assert run["output"] == {"a": None, "b": {"pid": os.getpid()}}
    runs_of = Counter((e["step"], e["phase"], e["pid"]) for e in _executions(log))
    assert runs_of == Counter(
        {
            ("a-probe", "blocking", worker.pid): 1,
            ("a-probe", "done", os.getpid()): 1,
            ("b-probe", "done", os.getpid()): 1,
        }
    )
    events = scenario.events(run_id)
    completed = Counter(e["node_id"] for e in events if e["event_type"] == "step_completed")
    assert completed == Counter({"a-probe": 1, "a-noop": 1, "b-probe": 1, "fan": 1})
    lost = [e for e in events if e["event_type"] == "step_failed"]
    assert len(lost) == 1 and lost[0]["branch_path"] == ["fan/a"]
    assert lost[0]["payload"]["error"]["type"] == "lease_expired"
    assert [e["event_type"] for e in events].count("run_completed") == 1


def _lease_of(app, node_id: str):
    with database(app).session() as session:
        return session.scalar(
            select(RunBranch.lease_expires_at).where(RunBranch.current_step == node_id)
        )


def test_an_action_running_three_lease_periods_keeps_its_lease_and_runs_once(
    app, scenario, db_url, tmp_path
):
    log, gate = tmp_path / "probe.log", tmp_path / "gate"
    lease = 3
    scenario.deploy(
        "long",
        [
            {
                "id": "fan",
                "type": "parallel",
                "branches": [
                    {
                        "id": "slow",
                        "steps": [
                            {
                                "id": "long-probe",
                                "type": "action",
                                "action": "probe",
                                "args": {"log": str(log), "gate": str(gate)},
                            }
                        ],
                    },
                    {
                        "id": "fast",
                        "steps": [{"id": "quick", "type": "action", "action": "echo", "args": 1}],
                    },
                ],
            }
        ],
    )
    worker = _spawn(
        db_url, tmp_path / "worker.err", threads=1, extra_env={"ALMANAC_LEASE_SECONDS": str(lease)}
    )
    try:
        run_id = scenario.start("long")["run_id"]
        _wait_for(lambda: log.exists() and "waiting" in log.read_text())
        for _ in range(5):  # 10 seconds of clock: more than three lease periods
            expected = scenario.advance(seconds=2) + timedelta(seconds=lease)
            # The heartbeat (every second) pushes the lease to a full period past the new now.
            _wait_for(lambda expected=expected: _lease_of(app, "long-probe") == expected)
            scenario.tick(work=False)  # recovers expired leases: there must be none
        gate.write_text("open")
        _wait_for(lambda: _status(app, run_id) == "completed")
    finally:
        _stop(worker)
    assert "Traceback" not in worker.stderr_path.read_text()  # type: ignore[attr-defined]
    phases = [(e["step"], e["phase"]) for e in _executions(log)]
    assert phases == [("long-probe", "waiting"), ("long-probe", "done")]
    types = scenario.types(run_id)
    assert "step_failed" not in types
    starts = [e["node_id"] for e in scenario.events(run_id) if e["event_type"] == "step_started"]
    assert starts.count("long-probe") == 1


@pytest.mark.parametrize("backend", ["postgres"])
def test_two_worker_processes_share_the_branches_of_runs_and_run_each_step_once(
    app, scenario, db_url, tmp_path
):
    log = tmp_path / "probe.log"
    probe = {"type": "action", "action": "probe", "args": {"log": str(log), "seconds": 0.02}}
    branches = [
        {"id": name, "steps": [{"id": f"{name}-1", **probe}, {"id": f"{name}-2", **probe}]}
        for name in ("eu", "us", "apac")
    ]
    scenario.deploy(
        "shared", [{"id": "fan", "type": "parallel", "max_concurrency": 2, "branches": branches}]
    )
    workers = [_spawn(db_url, tmp_path / f"worker-{i}.err") for i in range(2)]
    try:
        run_ids = [scenario.start("shared")["run_id"] for _ in range(8)]
        _wait_for(lambda: all(_status(app, run_id) == "completed" for run_id in run_ids))
    finally:
        for process in workers:
            _stop(process)
    for process in workers:
        assert "Traceback" not in process.stderr_path.read_text()  # type: ignore[attr-defined]
    per_step = Counter((e["run"], e["step"]) for e in _executions(log))
    expected = {(r, f"{b}-{i}") for r in run_ids for b in ("eu", "us", "apac") for i in (1, 2)}
    assert set(per_step) == expected and set(per_step.values()) == {1}
    assert {e["pid"] for e in _executions(log)} == {w.pid for w in workers}
    for run_id in run_ids:
        assert scenario.run(run_id)["output"] == {
            b: {"pid": _pid_of(log, run_id, f"{b}-2")} for b in ("eu", "us", "apac")
        }


def _pid_of(log, run_id: str, step: str) -> int:
    return next(e["pid"] for e in _executions(log) if e["run"] == run_id and e["step"] == step)
