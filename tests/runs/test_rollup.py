"""The runs rollup (runs per namespace, hour and state) agrees with counting the runs directly,
after starts by the tick and by hand, completions, failures, cancels, terminations, savepoints
rolled back, and concurrent writers (both databases)."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from sqlalchemy import delete, func, select, update

from app.context import database
from app.db import Namespace, Run, RunRollup, Workflow, rollup
from app.db.rollup import hour_of, rebuild, state_of
from app.runs import lifecycle
from app.runs.locking import begin_write
from app.runs.overview import OUTCOME_OF, runs_per_hour
from tests.conftest import FIXED_NOW
from tests.support.rollup_check import assert_rollup_agrees
from tests.support.schedules_harness import at

FAILING = [{"id": "charge", "type": "action", "action": "fail", "retry": {"max_attempts": 1}}]
TASK = [{"id": "review", "type": "task", "title": "Check"}]
ECHO = [{"id": "one", "type": "action", "action": "echo", "args": 1}]


def counted(app) -> Counter:
    """(namespace, hour, state) -> runs, counted from the runs themselves."""
    with database(app).session() as session:
        rows = session.execute(select(Run.namespace_id, Run.created_at, Run.status))
        found: Counter = Counter()
        for ns, created, status in rows:
            found[(ns, hour_of(created), state_of(status))] += 1
        return found


def rolled_up(app) -> Counter:
    with database(app).session() as session:
        rows = session.execute(
            select(
                RunRollup.namespace_id, RunRollup.hour, RunRollup.state, func.sum(RunRollup.runs)
            ).group_by(RunRollup.namespace_id, RunRollup.hour, RunRollup.state)
        )
        return Counter({(ns, hour, state): int(n) for ns, hour, state, n in rows if n})


def assert_agrees(app) -> Counter:
    direct = counted(app)
    assert rolled_up(app) == direct
    assert_rollup_agrees(app)
    return direct


def test_rollup_agrees_with_the_runs_after_a_mix_of_starts_and_ends(h, admin_api, app):
    ready = h.workflow("report")
    for name in ("s1", "s2", "s3"):
        h.create(name, "5 * * * *", activation_id=ready)
    h.tick("12:05")  # the tick starts three runs in bulk
    runs = {run.schedule_id: run.run_id for run in h.runs()}
    h.finish(runs["s1"], "failed")
    h.finish(runs["s2"], "completed")
    h.finish(runs["s3"], "timed_out")
    assert_agrees(app)
    h.tick("13:05")  # three more in the next hour; the tick's workers complete them
    for body in ({"name": "charge", "steps": FAILING}, {"name": "review", "steps": TASK}):
        assert admin_api.post("/workflows", json=body).status_code == 201
        assert admin_api.post("/activations", json={"workflow": body["name"]}).status_code == 201
    for run_id, flow in (
        ("c-1", "charge"),
        ("r-1", "review"),
        ("r-2", "review"),
        ("r-3", "review"),
    ):
        assert admin_api.post("/runs", json={"workflow": flow, "run_id": run_id}).status_code == 201
    # The same run id again answers with that run (a savepoint rolled back): nothing counted.
    assert admin_api.post("/runs", json={"workflow": "review", "run_id": "r-1"}).status_code == 200
    assert admin_api.post("/runs/r-2/terminate", json={}).status_code == 200
    assert admin_api.post("/runs/r-3/cancel", json={}).status_code in (200, 202)
    assert admin_api.post("/admin/tick", json={"work": True}).status_code == 200
    h.set_clock("13:30")
    direct = assert_agrees(app)
    states = Counter()
    for (_ns, _hour, state), n in direct.items():
        states[state] += n
    assert states == {
        "failed": 2,  # s1, and c-1 whose step failed
        "completed": 4,  # s2 and the three 13:05 runs
        "timed_out": 1,
        "terminated": 1,
        "cancelled": 1,
        "active": 1,  # r-1 waits on its task
    }
    # The overview reads the rollup and shows the same per hour and outcome.
    with database(app).session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        hours = runs_per_hour(session, namespace, at("13:30"))
    shown = {(hc.start, outcome): n for hc in hours for outcome, n in hc.counts.items() if n}
    expected: Counter = Counter()
    for (_ns, hour, state), n in direct.items():
        expected[(hour, "in progress" if state == "active" else OUTCOME_OF[state])] += n
    assert shown == dict(expected)


def _target(session):
    namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
    workflow = session.scalar(select(Workflow).where(Workflow.namespace_id == namespace.id))
    return namespace, lifecycle.resolve_target(session, namespace, workflow=workflow.name)


def test_savepoints_and_rollbacks_count_nothing(h, app):
    h.workflow("report")
    db = database(app)
    with db.session() as session:
        begin_write(session)
        namespace, target = _target(session)
        lifecycle.start_run(session, FIXED_NOW, namespace, target, "kept", {})
        with session.begin_nested() as savepoint:
            lifecycle.start_run(session, FIXED_NOW, namespace, target, "dropped", {})
            session.flush()
            savepoint.rollback()
        kept = session.scalar(select(Run).where(Run.run_id == "kept"))
        with session.begin_nested() as savepoint:
            lifecycle.finish_run(session, kept, FIXED_NOW, "failed", "run_failed", {})
            session.flush()
            savepoint.rollback()
        session.commit()
    with db.session() as session:
        begin_write(session)
        namespace, target = _target(session)
        lifecycle.start_run(session, FIXED_NOW, namespace, target, "never", {})
        session.flush()
        session.rollback()
    direct = assert_agrees(app)
    assert sum(direct.values()) == 1
    assert list(direct)[0][2] == "active"
    # A recount from the runs (after loading runs in bulk) gives the same rows.
    with db.session() as session:
        begin_write(session)
        session.execute(delete(RunRollup))
        session.commit()
    assert rolled_up(app) == Counter()
    with db.session() as session:
        begin_write(session)
        rebuild(session.connection())
        session.commit()
    assert rolled_up(app) == direct


def test_concurrent_writers_lose_no_increment(h, app):
    h.workflow("report")
    db = database(app)
    per_thread, threads = 12, 4
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for n in range(per_thread):
                with db.session() as session:
                    begin_write(session)
                    namespace, target = _target(session)
                    # Every run in the same hour: every writer adds to the same rows.
                    when = FIXED_NOW + timedelta(seconds=n)
                    run = lifecycle.start_run(session, when, namespace, target, f"t{index}-{n}", {})
                    session.commit()
                with db.session() as session:
                    begin_write(session)
                    run = session.get(Run, run.id, with_for_update=True)
                    status = ("completed", "failed", "cancelled")[n % 3]
                    if n % 4:
                        lifecycle.finish_run(session, run, when, status, f"run_{status}", {})
                    session.commit()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    direct = assert_agrees(app)
    assert sum(direct.values()) == per_thread * threads
    assert sum(n for key, n in direct.items() if key[2] == "active") == threads * 3


def test_core_writes_report_their_changes(h, app):
    h.workflow("report")
    db = database(app)
    with db.session() as session:
        begin_write(session)
        namespace, target = _target(session)
        run = lifecycle.start_run(session, FIXED_NOW, namespace, target, "core-1", {})
        session.commit()
    with db.session() as session:
        begin_write(session)
        session.execute(update(Run).where(Run.id == run.id).values(status="completed"))
        rollup.record_status_changes(
            session, [(run.id, run.namespace_id, run.created_at, "pending", "completed")]
        )
        session.commit()
    direct = assert_agrees(app)
    assert [key[2] for key in direct] == ["completed"]
    # And back, so the run again agrees with its history.
    with db.session() as session:
        begin_write(session)
        session.execute(update(Run).where(Run.id == run.id).values(status="pending"))
        rollup.record_status_changes(
            session, [(run.id, run.namespace_id, run.created_at, "completed", "pending")]
        )
        session.commit()
    assert [key[2] for key in assert_agrees(app)] == ["active"]
