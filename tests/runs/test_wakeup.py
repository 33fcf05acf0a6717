"""Idle workers are woken by committed work on PostgreSQL instead of waiting for their next poll;
SQLite's poll. What wakes them: run starts (API and tick), finished steps, nothing rolled back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from flask import Flask

from app.context import clock, database
from app.db.announce import CHANNEL
from app.runs import engine
from app.runs import wakeup as wakeup_module
from app.runs.pool import WorkerPool
from app.runs.wakeup import Wakeup
from tests.support.runs_scenario import Scenario

NOOP = [{"id": "only", "type": "action", "action": "noop"}]


def _wait_for(predicate, seconds: float = 30.0) -> bool:
    """Whether `predicate` became true within `seconds` (the pool works on its own threads)."""
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def listening(app: Flask, postgres_owner_url: str) -> Iterator[psycopg.Connection]:
    """A connection listening on the workers' channel (PostgreSQL only)."""
    if database(app).is_sqlite:
        pytest.fail("for PostgreSQL tests only")
    url = postgres_owner_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        yield conn


def _notices(conn: psycopg.Connection, wait: float) -> int:
    return sum(1 for _ in conn.notifies(timeout=wait))


def test_an_idle_pool_starts_a_new_run_without_waiting_for_its_poll(
    app: Flask, scenario: Scenario
) -> None:
    scenario.deploy("flow", NOOP)
    sqlite = database(app).is_sqlite
    # On PostgreSQL the threads would sleep an hour between polls: only a wake-up can start
    # the run in time. SQLite has no notifications: its threads poll.
    pool = WorkerPool(database(app), clock(app), size=2, poll_seconds=0.05 if sqlite else 3600)
    pool.start()
    try:
        # Both threads looked, found nothing, and went to sleep.
        assert _wait_for(lambda: pool.wakeup.seen() >= (0 if sqlite else 1))
        time.sleep(0.1)
        run_id = scenario.start("flow")["run_id"]
        assert _wait_for(lambda: scenario.run(run_id)["status"] == "completed", 20)
    finally:
        pool.stop()
    assert pool.listener.thread.is_alive() is False
    assert scenario.types(run_id)[-1] == "run_completed"


@pytest.mark.parametrize("backend", ["postgres"])
def test_committed_starts_announce_work_and_refused_ones_do_not(
    scenario: Scenario, listening: psycopg.Connection
) -> None:
    scenario.deploy("flow", NOOP)
    assert _notices(listening, 0.2) == 0
    scenario.start("flow")
    assert _notices(listening, 5) == 1
    # Refused (nothing written): no notice.
    scenario.start("missing", expect=404)
    scenario.start("flow", expect=422, run_id="schedule:taken")
    assert _notices(listening, 0.3) == 0


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_tick_that_starts_runs_announces_them_once(
    scenario: Scenario, listening: psycopg.Connection
) -> None:
    scenario.deploy("flow", NOOP)
    for index in range(3):
        body = {"id": f"s{index}", "cron": "* * * * *", "action": {"workflow": "flow"}}
        assert scenario.api.post("/schedules", json=body).status_code == 201
    assert _notices(listening, 0.2) == 0
    scenario.advance(seconds=60)
    result = scenario.tick(work=False)
    assert sum(row["outcome"] == "triggered" for row in result.rows) == 3
    # One transaction, three runs: PostgreSQL folds its notices into one.
    assert _notices(listening, 5) == 1
    # A tick with nothing due writes no run and announces nothing.
    scenario.tick(work=False)
    assert _notices(listening, 0.3) == 0


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_step_made_claimable_by_an_update_announces_work(
    app: Flask, scenario: Scenario, listening: psycopg.Connection
) -> None:
    """Not only new runs: a run already stored whose next step becomes claimable (here a wait
    that elapses) wakes the workers too; a run that only goes on waiting does not."""
    wait = {"id": "pause", "type": "wait", "duration": "PT1S"}
    scenario.deploy("paced", [NOOP[0], wait, {**NOOP[0], "id": "after"}])
    run_id = scenario.start("paced")["run_id"]
    assert _notices(listening, 5) == 1  # the new run
    settings = engine.WorkerSettings(name="test", queue=engine.ANY_QUEUE)
    assert engine.work_once(database(app), clock(app), settings) == 1
    assert scenario.run(run_id)["status"] == "waiting"
    assert _notices(listening, 0.3) == 0  # its first step done, the run waits: nothing to claim
    scenario.advance(seconds=1)
    scenario.tick(work=False)  # the wait elapses: the last step is claimable
    assert _notices(listening, 5) == 1
    assert engine.work_once(database(app), clock(app), settings) == 1
    assert scenario.run(run_id)["status"] == "completed"
    assert _notices(listening, 0.3) == 0  # the run finished: nothing to claim


def test_a_ring_between_looking_and_sleeping_is_not_slept_through() -> None:
    wakeup = Wakeup()
    seen = wakeup.seen()
    wakeup.ring()
    began = time.monotonic()
    assert wakeup.wait(seen, 60) is True
    assert time.monotonic() - began < 5
    assert wakeup.wait(wakeup.seen(), 0.01) is False


def test_steps_are_retried_after_a_backoff_by_polling(app: Flask, scenario: Scenario) -> None:
    """A notice is only a hint: work that becomes claimable later (a retry's backoff) is
    still found by the threads' poll."""
    scenario.deploy(
        "flaky",
        [
            {
                "id": "only",
                "type": "action",
                "action": "fail",
                "retry": {"max_attempts": 2, "backoff_seconds": 1},
            }
        ],
    )
    run_id = scenario.start("flaky")["run_id"]
    pool = WorkerPool(database(app), clock(app), size=1, poll_seconds=0.05).start()
    try:
        assert _wait_for(lambda: "step_failed" in scenario.types(run_id))
        scenario.set_clock(scenario.now() + timedelta(seconds=2))
        assert _wait_for(lambda: scenario.run(run_id)["status"] == "failed")
    finally:
        pool.stop()
    assert scenario.types(run_id).count("step_failed") == 2


@pytest.mark.parametrize("backend", ["postgres"])
def test_an_idle_pool_listens_again_after_its_connection_is_cut(
    app: Flask,
    scenario: Scenario,
    postgres_owner_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server restart ends the listening connection: the pool connects again, says so in its
    log, and is woken by the next committed work (its threads would poll only hourly)."""
    monkeypatch.setattr(wakeup_module, "RECONNECT_SECONDS", 0.05)
    scenario.deploy("flow", NOOP)
    url = postgres_owner_url.replace("postgresql+psycopg://", "postgresql://")
    listeners = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        f" AND query = 'LISTEN {CHANNEL}' AND pid <> pg_backend_pid()"
    )
    pool = WorkerPool(database(app), clock(app), size=1, poll_seconds=3600)
    with psycopg.connect(url, autocommit=True) as admin:
        pool.start()
        try:
            assert _wait_for(lambda: len(admin.execute(listeners).fetchall()) == 1)
            [(first,)] = admin.execute(listeners).fetchall()
            admin.execute("SELECT pg_terminate_backend(%s)", (first,))
            assert _wait_for(
                lambda: [row[0] for row in admin.execute(listeners)] not in ([], [first])
            )
            time.sleep(0.1)  # the thread looks once more after reconnecting, then sleeps
            run_id = scenario.start("flow")["run_id"]
            assert _wait_for(lambda: scenario.run(run_id)["status"] == "completed", 20)
        finally:
            pool.stop()
    messages = [
        record.getMessage() for record in caplog.records if record.name == wakeup_module.__name__
    ]
    assert messages[0].startswith("worker wake-ups paused, polling meanwhile")
    assert messages[1:] == ["worker wake-ups resumed"]
