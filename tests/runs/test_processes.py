"""Worker processes (`flask --app wsgi worker`): no step runs twice at once; a killed worker's
step runs again after its lease expires, and the run completes exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.auth.service import get_namespace
from app.context import database
from app.db import Run
from app.runs import lifecycle
from app.runs.engine import DEFAULT_LEASE_SECONDS
from tests.conftest import FIXED_NOW
from tests.support import probe_actions  # noqa: F401 - registers `probe` for deploy validation

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
_THREADS = {("worker",): "threads", ("scheduler", "run"): "workers"}


def _spawn(
    db_url: str,
    stderr: Path,
    *,
    threads: int = 2,
    block: bool = False,
    command: tuple[str, ...] = ("worker",),
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ALMANAC_DATABASE_URL": db_url,
        "ALMANAC_TESTING": "1",
        "ALMANAC_CLOCK": "manual",
        "ALMANAC_SCHEDULER": "off",
        "ALMANAC_SECRET_KEY": "test-secret-key-for-the-suite",
        "PYTHONPATH": str(ROOT),
        "ALMANAC_ACTION_MODULES": "tests.support.probe_actions",
        "ALMANAC_WORKER_POLL_SECONDS": "0.05",
        "ALMANAC_TICK_SECONDS": "0.1",
        "ALMANAC_PROBE_BLOCK": "1" if block else "0",
        **(extra_env or {}),
    }
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flask",
                "--app",
                "wsgi",
                *command,
                f"--{_THREADS[command]}",
                str(threads),
            ],
            cwd=ROOT,
            env=env,
            stderr=sink,
            stdout=sink,
        )
    process.stderr_path = stderr  # type: ignore[attr-defined]
    # The pool announces itself once its threads run.
    _wait_for(lambda: "worker thread" in stderr.read_text() or process.poll() is not None)
    assert process.poll() is None, stderr.read_text()
    return process


def _wait_for(condition, seconds: float = 60.0) -> None:
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "timed out waiting for the workers"
        time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start_together(app, workflow: str, count: int) -> list[str]:
    """Start `count` runs in one transaction, so idle workers all race for them at once."""
    with database(app).session() as session:
        namespace = get_namespace(session, "default")
        target = lifecycle.resolve_target(session, namespace, workflow=workflow)
        run_ids = [f"together-{i}" for i in range(count)]
        for run_id in run_ids:
            lifecycle.start_run(session, FIXED_NOW, namespace, target, run_id, {})
        session.commit()
    return run_ids


def _unfinished(app) -> int:
    with database(app).session() as session:
        return (
            session.scalar(select(func.count()).select_from(Run).where(Run.status != "completed"))
            or 0
        )


# The multi-process deployment is PostgreSQL's (SQLite serializes every writer anyway).
@pytest.mark.parametrize("backend", ["postgres"])
def test_two_worker_processes_never_run_the_same_step_at_once(app, scenario, db_url, tmp_path):
    log = tmp_path / "probe.log"
    scenario.deploy(
        "probed",
        [
            {
                "id": f"s{i}",
                "type": "action",
                "action": "probe",
                "args": {"log": str(log), "seconds": 0.05},
            }
            for i in range(3)
        ],
    )
    workers = [_spawn(db_url, tmp_path / f"worker-{i}.err") for i in range(2)]
    try:
        run_ids = _start_together(app, "probed", 20)
        _wait_for(lambda: _unfinished(app) == 0)
    finally:
        for process in workers:
            _stop(process)
    for process in workers:
        # Claims never collide: SKIP LOCKED hands each idle worker a different run.
        assert "Traceback" not in process.stderr_path.read_text()
    executions = [json.loads(line) for line in log.read_text().splitlines()]
    per_step = Counter((e["run"], e["step"]) for e in executions)
    assert set(per_step) == {(r, f"s{i}") for r in run_ids for i in range(3)}
    assert set(per_step.values()) == {1}
    assert {e["pid"] for e in executions} == {w.pid for w in workers}
    by_thread = sorted(executions, key=lambda e: e["start"])
    for earlier, later in zip(by_thread, by_thread[1:], strict=False):
        if (earlier["run"], earlier["step"]) == (later["run"], later["step"]):
            assert earlier["end"] <= later["start"]
    for run_id in run_ids:
        assert scenario.types(run_id).count("step_started") == 3
        assert scenario.types(run_id).count("run_completed") == 1


def test_a_killed_worker_process_step_runs_again_and_the_run_completes_once(
    app, scenario, db_url, tmp_path
):
    log = tmp_path / "probe.log"
    scenario.deploy(
        "probed",
        [
            {"id": "only", "type": "action", "action": "probe", "args": {"log": str(log)}},
            {"id": "after", "type": "action", "action": "noop"},
        ],
    )
    worker = _spawn(db_url, tmp_path / "worker.err", threads=1, block=True)
    try:
        run_id = scenario.start("probed")["run_id"]
        _wait_for(lambda: log.exists() and "blocking" in log.read_text())
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert scenario.run(run_id)["status"] == "running"
    scenario.set_clock(FIXED_NOW + timedelta(seconds=DEFAULT_LEASE_SECONDS))
    result = scenario.tick()
    assert result.steps == 2
    run = scenario.run(run_id)
    assert run["status"] == "completed"
    executions = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["phase"], e["pid"]) for e in executions] == [
        ("blocking", worker.pid),
        ("done", os.getpid()),
    ]
    types = scenario.types(run_id)
    assert types.count("run_completed") == 1
    assert types.count("step_completed") == 2


def test_scheduler_run_ticks_and_works_without_the_web_and_stops_on_sigterm(
    app, scenario, db_url, tmp_path
):
    scenario.deploy(
        "paced",
        [
            {"id": "first", "type": "action", "action": "echo", "args": 1},
            {"id": "pause", "type": "wait", "duration": "PT1S"},
            {"id": "second", "type": "action", "action": "echo", "args": 2},
        ],
    )
    run_id = scenario.start("paced")["run_id"]
    process = _spawn(db_url, tmp_path / "scheduler.err", threads=1, command=("scheduler", "run"))
    try:
        _wait_for(lambda: _status(app, run_id) == "waiting")
        scenario.set_clock(FIXED_NOW + timedelta(seconds=1))
        _wait_for(lambda: _status(app, run_id) == "completed")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    assert "Traceback" not in process.stderr_path.read_text()  # type: ignore[attr-defined]
    assert scenario.types(run_id).count("wait_elapsed") == 1


def _status(app, run_id: str) -> str | None:
    with database(app).session() as session:
        return session.scalar(select(Run.status).where(Run.run_id == run_id))
