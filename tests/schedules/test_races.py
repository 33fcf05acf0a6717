"""Races on PostgreSQL that row and advisory locks order: ending a run that a worker is writing
to, and the namespace's run limit under starts from several transactions at once.

Each test holds a lock in one transaction, sends the competing request from a thread, checks
that it waits, then commits and checks what the request answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select, text

from app.context import database
from app.db import Namespace, Run
from app.db.rls import Scope
from app.runs import lifecycle
from app.runs import service as runs_service
from app.runs.service import RunRequest
from app.ticker.tick import run_tick
from tests.support.schedules_harness import at

# Row locks and advisory locks are PostgreSQL's; SQLite serializes every writer anyway.
pytestmark = pytest.mark.parametrize("backend", ["postgres"])


def _started(request: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("response", request()))
    thread.start()
    return thread, box


def _waits(thread: threading.Thread) -> bool:
    thread.join(timeout=1.0)
    return thread.is_alive()


def test_a_trigger_ending_a_run_waits_for_the_worker_writing_its_history(h):
    h.create("s", overlap_policy="terminate_other")
    h.set_clock("12:01")
    first = h.post("s", "trigger").get_json()["run_id"]
    h.set_clock("12:02")
    revision = h.read("s")["revision"]
    with database(h.app).bound(Scope.all()).session() as worker:
        run = worker.scalar(select(Run).where(Run.run_id == first).with_for_update())
        assert run is not None
        lifecycle.append_event(worker, run, at("12:02"), "step_started", {"attempt": 1}, "a")
        worker.flush()
        thread, box = _started(lambda: h.post("s", "trigger", revision=revision))
        assert _waits(thread)  # on the run's row, not racing for its next history sequence
        worker.commit()
    thread.join()
    response = box["response"]
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["outcome"] == "triggered"
    ended = [r for r in h.runs("s") if r.run_id == first][0]
    assert ended.status == "terminated"


def test_the_run_limit_holds_when_two_transactions_start_runs_at_once(h):
    h.create("s", overlap_policy="allow_all", activation_id=h.workflow("flow"))
    h.set_limit(1)
    h.set_clock("12:01")
    db = database(h.app).bound(Scope.all())
    with db.session() as other:
        namespace = other.scalar(select(Namespace).where(Namespace.name == "default"))
        assert namespace is not None
        # Another starter (`POST /runs`) took the one free place and has not committed yet.
        run, created = runs_service.start(other, at("12:01"), namespace, RunRequest("flow"))
        assert created and run.status == "pending"
        thread, box = _started(lambda: h.post("s", "trigger"))
        assert _waits(thread)
        other.commit()
    thread.join()
    assert box["response"].status_code == 429, box["response"].get_json()


def _waiting_on_a_row_lock(h, count: int) -> bool:
    """Whether `count` sessions of this database wait on a lock (polled for a few seconds).
    Read from pg_locks: pg_stat_activity hides other logins' wait events from this one."""
    query = text(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE NOT l.granted AND a.datname = current_database()"
    )
    for _ in range(500):
        with database(h.app).engine.connect() as conn:
            if conn.scalar(query) >= count:
                return True
        time.sleep(0.01)
    return False


def test_a_tick_ending_several_schedules_runs_locks_them_in_the_workers_order(h):
    # The tick fires `a` before `b`; `a`'s active run is the newer one (the higher id).
    for name in ("a", "b"):
        h.create(name, cron="*/10 * * * *", overlap_policy="terminate_other")
    h.set_clock("12:01")
    older = h.post("b", "trigger").get_json()["run_id"]
    newer = h.post("a", "trigger").get_json()["run_id"]
    h.set_clock("12:10")
    with database(h.app).bound(Scope.all()).session() as worker:
        # A worker committing steps of both runs locks them in ascending id order.
        worker.scalar(select(Run).where(Run.run_id == older).with_for_update())
        thread, box = _started(lambda: run_tick(h.app))
        assert _waiting_on_a_row_lock(h, 1)
        # The tick waits for the older run without holding the newer one: no deadlock.
        worker.execute(text("SET LOCAL lock_timeout = '500ms'"))
        worker.scalar(select(Run).where(Run.run_id == newer).with_for_update())
        worker.commit()
    thread.join()
    result = box["response"]
    assert result.failures == []
    assert sorted((r["schedule_id"], r["outcome"]) for r in result.rows) == [
        ("a", "triggered"),
        ("b", "triggered"),
    ]
    ended = {r.run_id: r.status for r in h.runs() if r.run_id in (older, newer)}
    assert ended == {older: "terminated", newer: "terminated"}
