"""Claim batches: every claimed step's lease is kept alive while earlier ones run, a batch that
runs long hands its unstarted steps back, and claims adapt to how long actions take.

The clock is the manual one and the batch's stopwatch is injected, so nothing sleeps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.context import clock, database
from app.db import Run
from app.db import session as session_module
from app.db.roles import APP_ROLE
from app.runs import engine
from app.runs.actions import ActionContext, action
from app.runs.claims import ClaimSize
from app.runs.leases import Heartbeat
from app.ticker.host import worker_pool

LEASE = engine.DEFAULT_LEASE_SECONDS
# What the `batch-hook` action does, once, for a run (by run id) while it executes; every execution
# is recorded as (run id, attempt).
HOOKS: dict[str, Callable[[], None]] = {}
EXECUTED: list[tuple[str, int]] = []
# A one-step run's history when its step ran once and completed.
RAN_ONCE = ["run_started", "step_started", "step_completed", "run_completed"]


@action("batch-hook")
def batch_hook(ctx: ActionContext) -> str:
    EXECUTED.append((ctx.run_id, ctx.attempt))
    hook = HOOKS.pop(ctx.run_id, None)  # once: a step that runs again runs plainly
    if hook is not None:
        hook()
    return ctx.run_id


@pytest.fixture(autouse=True)
def _fresh_hooks():
    HOOKS.clear()
    EXECUTED.clear()
    yield
    HOOKS.clear()
    EXECUTED.clear()


def _start(scenario, count: int) -> list[str]:
    scenario.deploy("hooked", [{"id": "act", "type": "action", "action": "batch-hook"}])
    return [scenario.start("hooked", run_id=f"hooked-{i}")["run_id"] for i in range(count)]


def _leases(app) -> dict[str, datetime | None]:
    with database(app).session() as session:
        return dict(session.execute(select(Run.run_id, Run.lease_expires_at)).tuples().all())


class Stopwatch:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_batch_keeps_the_lease_of_every_claimed_step_alive_while_earlier_ones_run(app, scenario):
    run_ids = _start(scenario, 3)
    db, clk = database(app), clock(app)
    heartbeat = Heartbeat(db, clk, LEASE)
    seen: list[dict[str, datetime | None]] = []

    def long_first_action() -> None:
        # Four heartbeat periods of 40 s: 160 s, well past the 60 s lease of the steps claimed
        # with this one and not started yet. The tick looks for expired leases after each.
        for _ in range(4):
            now = scenario.advance(seconds=40)
            assert heartbeat.beat() == 3  # all three claims of the batch, not only this one
            seen.append(_leases(app))
            scenario.tick(work=False)  # recovers expired leases: there must be none
            assert all(expires is not None and expires > now for expires in seen[-1].values())

    HOOKS[run_ids[0]] = long_first_action
    settings = engine.WorkerSettings(name="batcher", queue=engine.ANY_QUEUE, batch=3)
    advanced = engine.work_once(db, clk, settings, heartbeat=heartbeat, monotonic=Stopwatch())
    assert advanced == 3
    assert len(seen) == 4
    assert Counter(EXECUTED) == Counter({(run_id, 1): 1 for run_id in run_ids})
    for run_id in run_ids:
        assert scenario.run(run_id)["status"] == "completed"
        assert scenario.types(run_id) == RAN_ONCE
    # Once the batch is committed the heartbeat holds nothing any more.
    assert heartbeat.beat() == 0
    heartbeat.stop()


def test_without_heartbeats_an_unstarted_claim_would_lapse_and_run_again(app, scenario):
    """The control for the test above: the same batch with no heartbeat loses its leases."""
    run_ids = _start(scenario, 2)

    def long_first_action() -> None:
        scenario.advance(seconds=LEASE + 1)
        assert scenario.tick(work=False).steps == 0

    HOOKS[run_ids[0]] = long_first_action
    settings = engine.WorkerSettings(name="batcher", queue=engine.ANY_QUEUE, batch=2)
    engine.work_once(database(app), clock(app), settings, monotonic=Stopwatch())
    # The tick recovered both expired leases, the unstarted one included; the batch did not
    # know, ran the second action anyway, and both results were discarded: both steps run
    # twice. This is what the heartbeat prevents.
    failed = [e for e in scenario.events(run_ids[1]) if e["event_type"] == "step_failed"]
    assert [e["payload"]["error"]["type"] for e in failed] == ["lease_expired"]
    scenario.tick()
    assert Counter(run for run, _ in EXECUTED) == Counter({run_ids[0]: 2, run_ids[1]: 2})


def test_a_batch_that_runs_long_hands_its_unstarted_steps_back_at_once(app, scenario):
    run_ids = _start(scenario, 4)
    watch = Stopwatch()
    HOOKS[run_ids[1]] = lambda: setattr(watch, "now", watch.now + 1.5)  # a slow second action
    settings = engine.WorkerSettings(
        name="batcher", queue=engine.ANY_QUEUE, batch=4, batch_seconds=1.0
    )
    db, clk = database(app), clock(app)
    size = ClaimSize(current=4)
    assert engine.work_once(db, clk, settings, size=size, monotonic=watch) == 2
    assert size.current == 1  # the next claim takes one step
    # The first two completed; the other two were handed back unstarted, the same attempt.
    for run_id in run_ids[:2]:
        assert scenario.run(run_id)["status"] == "completed"
    for run_id in run_ids[2:]:
        run = scenario.run(run_id)
        assert run["status"] == "running"
        failed = scenario.events(run_id)[-1]
        assert failed["event_type"] == "step_failed"
        assert failed["payload"]["attempt"] == 1
        assert failed["payload"]["will_retry"] is True
        assert failed["payload"]["error"]["type"] == "handed_back"
        assert "handed it back unstarted after 1.5 s" in failed["payload"]["error"]["message"]
    assert _leases(app)[run_ids[2]] is None and _leases(app)[run_ids[3]] is None
    # Claimable at once, by another worker, without moving the clock; each runs once.
    other = engine.WorkerSettings(name="other", queue=engine.ANY_QUEUE, batch=25)
    assert engine.work_once(db, clk, other, monotonic=Stopwatch()) == 2
    assert sorted(EXECUTED) == sorted((run_id, 1) for run_id in run_ids)
    for run_id in run_ids[2:]:
        assert scenario.run(run_id)["status"] == "completed"
        types = scenario.types(run_id)
        assert types.count("step_started") == 2 and types.count("step_completed") == 1


def test_a_handed_back_step_of_a_cancelled_run_ends_the_run(app, scenario):
    run_ids = _start(scenario, 2)
    watch = Stopwatch()

    def slow_and_cancel() -> None:
        watch.now += 2
        response = scenario.api.post(f"/runs/{run_ids[1]}/cancel", json={})
        assert response.status_code == 200

    HOOKS[run_ids[0]] = slow_and_cancel
    settings = engine.WorkerSettings(name="batcher", queue=engine.ANY_QUEUE, batch=2)
    assert engine.work_once(database(app), clock(app), settings, monotonic=watch) == 1
    assert scenario.run(run_ids[1])["status"] == "cancelled"
    assert EXECUTED == [(run_ids[0], 1)]


def test_a_stopping_worker_finishes_its_step_and_hands_the_rest_back(app, scenario):
    run_ids = _start(scenario, 3)
    settings = engine.WorkerSettings(name="stopping", queue=engine.ANY_QUEUE, batch=3)
    stop = []
    HOOKS[run_ids[0]] = lambda: stop.append(True)  # SIGTERM arrives during the first action
    advanced = engine.work_once(
        database(app), clock(app), settings, monotonic=Stopwatch(), stopping=lambda: bool(stop)
    )
    assert advanced == 1
    assert scenario.run(run_ids[0])["status"] == "completed"
    for run_id in run_ids[1:]:
        assert scenario.events(run_id)[-1]["payload"]["error"]["type"] == "handed_back"
    scenario.tick()
    assert sorted(EXECUTED) == sorted((run_id, 1) for run_id in run_ids)


def test_claims_grow_while_batches_are_quick_and_shrink_after_a_slow_one(app, scenario):
    run_ids = _start(scenario, 40)
    watch = Stopwatch()
    # The first step of the sixth batch runs past the budget: the rest of that batch goes back.
    HOOKS[run_ids[31]] = lambda: setattr(watch, "now", watch.now + 1.2)
    settings = engine.WorkerSettings(
        name="adaptive", queue=engine.ANY_QUEUE, batch=16, batch_seconds=1.0
    )
    size = ClaimSize()
    sizes = []
    while advanced := engine.work_once(
        database(app), clock(app), settings, size=size, monotonic=watch
    ):
        sizes.append(advanced)
    # 1, 2, 4, 8, 16 (capped at the batch); then a batch of 9 that ran 1.2 s started one step
    # and handed 8 back; claims start over at 1 and grow again over what is left.
    assert sizes == [1, 2, 4, 8, 16, 1, 1, 2, 4, 1]
    assert Counter(EXECUTED) == Counter({(run_id, 1): 1 for run_id in run_ids})
    handed_back = [
        run_id
        for run_id in run_ids
        if any(e["event_type"] == "step_failed" for e in scenario.events(run_id))
    ]
    assert handed_back == run_ids[32:]


def test_hand_back_never_waits_longer_than_a_heartbeat_period():
    settings = engine.WorkerSettings(name="w", lease_seconds=6, batch_seconds=30)
    assert settings.hand_back_after == 2
    assert engine.WorkerSettings(name="w").hand_back_after == 1.0
    assert engine.WorkerSettings(name="w").batch == 100


def test_the_worker_pool_defaults_to_batches_of_100_handed_back_after_a_second(app):
    pool = worker_pool(app)
    assert (pool.batch, pool.batch_seconds) == (100, 1.0)


def _cut_every_connection_of_the_app(owner_url: str) -> None:
    """What a database restart does to a pool: every connection the app holds is gone."""
    url = owner_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as admin:
        cut = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            f" AND usename = '{APP_ROLE}'"
        ).fetchall()
    assert cut, "the app held no connection to cut"


@pytest.mark.parametrize("backend", ["postgres"])
def test_results_finished_across_a_database_restart_are_committed_not_run_again(
    app, scenario, postgres_owner_url, monkeypatch
):
    """The connection the batch commits on died while its action ran (a restart): the commit is
    tried again on a fresh one, and the action's result counts. Before, the batch gave up, the
    lease lapsed, and the action ran a second time."""
    [run_id] = _start(scenario, 1)
    # The pooled connection was used a moment ago: it is not pinged before the commit.
    monkeypatch.setattr(session_module, "PING_AFTER_IDLE_SECONDS", 3600.0)
    HOOKS[run_id] = lambda: _cut_every_connection_of_the_app(postgres_owner_url)
    settings = engine.WorkerSettings(name="restarted", queue=engine.ANY_QUEUE, batch=1)
    assert engine.work_once(database(app), clock(app), settings, monotonic=Stopwatch()) == 1
    assert scenario.run(run_id)["status"] == "completed"
    assert scenario.types(run_id) == RAN_ONCE
    # Nothing is left to run again once the lease would have lapsed.
    scenario.advance(seconds=LEASE + 1)
    scenario.tick()
    assert EXECUTED == [(run_id, 1)]


def test_a_commit_that_meets_an_outage_is_tried_again(app, scenario, monkeypatch):
    [run_id] = _start(scenario, 1)
    real, calls = engine.commit_outcomes, []

    def away_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("COMMIT", None, Exception("server closed the connection"))
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "commit_outcomes", away_once)
    settings = engine.WorkerSettings(name="retrier", queue=engine.ANY_QUEUE, batch=1)
    assert engine.work_once(database(app), clock(app), settings, monotonic=Stopwatch()) == 1
    assert len(calls) == 2
    assert scenario.run(run_id)["status"] == "completed"
    scenario.advance(seconds=LEASE + 1)
    scenario.tick()
    assert EXECUTED == [(run_id, 1)]


def test_an_outage_that_outlasts_half_a_lease_is_left_to_the_lease(app, scenario, monkeypatch):
    """A database away for long: the batch stops trying (its thread logs it and goes on), and
    the step runs again once its lease lapses, as after any lost worker."""
    [run_id] = _start(scenario, 1)
    watch = Stopwatch()

    def away(*_args, **_kwargs):
        watch.now += 10.0  # each attempt waits on the database for 10 s
        raise OperationalError("COMMIT", None, Exception("connection refused"))

    monkeypatch.setattr(engine, "commit_outcomes", away)
    monkeypatch.setattr(engine.time, "sleep", lambda seconds: None)
    settings = engine.WorkerSettings(name="patient", queue=engine.ANY_QUEUE, batch=1)
    with pytest.raises(OperationalError):
        engine.work_once(database(app), clock(app), settings, monotonic=watch)
    # 30 s of a 60 s lease: three attempts, then it gave up.
    assert watch.now == 30.0
    monkeypatch.undo()
    scenario.advance(seconds=LEASE + 1)
    scenario.tick()
    assert scenario.run(run_id)["status"] == "completed"
    assert EXECUTED == [(run_id, 1), (run_id, 1)]
