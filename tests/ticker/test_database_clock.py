"""One clock on PostgreSQL: the database's.

Two `scheduler run` processes whose own clocks are skewed by +90 s and -90 s fire the same
occurrences, at the database's time, none early and none twice; and a start whose grace ran out
while its page waited on a lock is recorded as missed, never started stale.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.calendar import parse_instant
from app.db import normalize_url
from app.ticker import rotation
from app.ticker.tick import run_tick
from tests.conftest import make_test_app
from tests.support.schedules_harness import Harness

ROOT = Path(__file__).resolve().parents[2]
EVERY = 5
pytestmark = pytest.mark.parametrize("backend", ["postgres"])


@pytest.fixture
def owner(postgres_owner_url):
    engine = create_engine(normalize_url(postgres_owner_url))
    yield engine
    engine.dispose()


def _scheduler(db_url: str, offset: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ALMANAC_DATABASE_URL": db_url,
        "ALMANAC_TESTING": "1",
        "ALMANAC_CLOCK": "system",
        "ALMANAC_CLOCK_OFFSET_SECONDS": str(offset),
        "ALMANAC_SCHEDULER": "off",
        "ALMANAC_SECRET_KEY": "test-secret-key-for-the-suite",
        "ALMANAC_TICK_SECONDS": "0.2",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "scheduler", "run", "--workers", "0"]
    with log.open("wb") as sink:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=sink)


def _instant(run_id: str) -> datetime:
    stamp = run_id.rsplit(":", 1)[1]
    return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


@pytest.mark.slow
def test_schedulers_with_skewed_clocks_fire_at_the_databases_time_once(db_url, owner, tmp_path):
    app = make_test_app(db_url, CLOCK="system")
    from tests.conftest import Accounts, Api

    admin = Accounts(app).create("root", role="admin", superuser=True)
    h = Harness(app, Api(app.test_client(), admin.token))
    h.workflow(name="flow")
    processes = [
        _scheduler(db_url, offset, tmp_path / f"scheduler{offset}.log") for offset in (90, -90)
    ]
    # Save once both tick, so no occurrence falls due while they start.
    give_up = time.monotonic() + 60
    with owner.connect() as conn:
        while conn.scalar(text("SELECT count(*) FROM ticker_beats")) < 2:
            assert time.monotonic() < give_up, "the schedulers never ticked"
            time.sleep(0.05)
    body = {"id": "s", "spec": {"intervals": [{"every": f"PT{EVERY}S"}]}}
    h.save(body | {"action": {"workflow": "flow"}, "overlap_policy": "allow_all"}, expect=201)
    first_seen: dict[str, datetime] = {}
    try:
        give_up = time.monotonic() + 60
        while len(first_seen) < 4 and time.monotonic() < give_up:
            with owner.connect() as conn:
                seen_at = conn.scalar(text("SELECT clock_timestamp()"))
                for run_id in conn.scalars(text("SELECT run_id FROM runs")):
                    first_seen.setdefault(run_id, seen_at)
            time.sleep(0.05)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)
    logs = "".join(p.read_text() for p in tmp_path.glob("scheduler*.log"))
    assert "Traceback" not in logs and "failed" not in logs, logs
    assert len(first_seen) >= 4, logs
    instants = sorted(_instant(run_id) for run_id in first_seen)
    # The same occurrences, consecutive: neither process skipped or moved one.
    assert all(b - a == timedelta(seconds=EVERY) for a, b in pairwise(instants))
    for run_id, seen in first_seen.items():
        lag = (seen - _instant(run_id)).total_seconds()
        # Never before the database's due time, and not a skewed clock's 90 s late either.
        assert 0 <= lag < 10, (run_id, lag)
    with owner.connect() as conn:
        assert conn.scalar(text("SELECT count(*) - count(DISTINCT run_id) FROM runs")) == 0
        ledger = conn.execute(
            text("SELECT kind, instant FROM schedule_occurrences ORDER BY instant")
        ).all()
        beats = conn.scalar(text("SELECT count(*) FROM ticker_beats"))
    assert {kind for kind, _ in ledger} == {"started"}, ledger
    assert beats == 2


# What a page of firings may wait on: the run id it needs, held by an uncommitted insert; and the
# run counts (`run_rollup`), which the page read the clock before writing, at its commit, so a
# page that waited there past a start's grace still committed the start.
LOCKS = {
    "run id": (
        "INSERT INTO runs (uid, namespace_id, run_id, workflow_id, workflow_version_id, "
        "status, input, step_index, step_outputs, attempt, labels, memo, "
        "search_attributes, last_sequence, created_at) "
        "SELECT gen_random_uuid()::text, 1, 'schedule:s:20260105T120500Z', w.id, v.id, "
        "'pending', '{}', 0, '{}', 0, '{}', '{}', '{}', 0, now() FROM workflows w "
        "JOIN workflow_versions v ON v.workflow_id = w.id"
    ),
    "run counts": "LOCK TABLE run_rollup IN EXCLUSIVE MODE",
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_start_whose_grace_ran_out_waiting_on_a_lock_is_recorded_as_missed(
    app, admin_api, owner, monkeypatch, lock
):
    # Long enough a lock wait for the test to move the clock while the page waits.
    monkeypatch.setattr(
        rotation, "PHASE_LIMITS", {"statement_timeout": "30s", "lock_timeout": "20s"}
    )
    h = Harness(app, admin_api)
    h.workflow(name="flow")
    h.save({"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "flow"}}, expect=201)
    h.set_clock("12:05")
    result: list = []
    with owner.connect() as conn:
        conn.execute(text(LOCKS[lock]))
        ticker = threading.Thread(target=lambda: result.append(run_tick(app)))
        ticker.start()
        give_up = time.monotonic() + 30
        while not conn.scalar(text("SELECT count(*) FROM pg_locks WHERE NOT granted")):
            assert time.monotonic() < give_up, "the tick never waited on the lock"
            time.sleep(0.02)
        # While the page waits, the grace of 12:05 (60 s) runs out.
        h.set_clock("12:06:30")
        conn.rollback()
    ticker.join(timeout=60)
    rows = result[0].rows
    assert [(r["outcome"], r["run_id"]) for r in rows] == [("skipped", None)]
    ledger = h.api.get("/schedules/s/occurrences").get_json()["items"]
    assert [(i["kind"], i["reason"]) for i in ledger] == [("skipped", "missed")]
    assert parse_instant(ledger[0]["instant"]) == parse_instant("2026-01-05T12:05:00Z")
    with owner.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM runs")) == 0


class _NinetySecondsBehind(datetime):
    """A machine whose own clock is 90 s behind."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return datetime.now(tz) - timedelta(seconds=90)


def test_beats_and_their_age_are_read_on_the_databases_clock(app, admin_api, monkeypatch):
    """A beat recorded this process's own time and `/health` aged it by its own: a ticker on a
    machine 90 s behind looked 90 s late (degraded), and one 90 s ahead looked alive for 90 s
    after it died. Both now read the database's clock."""
    from app.db import clock
    from app.ticker import tick

    for module in (tick, clock):
        monkeypatch.setattr(module, "datetime", _NinetySecondsBehind)
    assert not run_tick(app).failures
    monkeypatch.undo()
    ticker = admin_api.get("/health").get_json()["ticker"]
    assert ticker["lag_seconds"] is not None and 0 <= ticker["lag_seconds"] < 10, ticker
