"""Replicas: four processes tick one PostgreSQL database; one is killed mid-tick.

2,000 schedules fire every minute for six simulated minutes (the manual clock is shared through
the database). No occurrence may start twice or be lost, and every run carries exactly one
`ScheduleTriggered`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url

from app.db import Schedule, make_engine
from tests.conftest import FIXED_NOW

WORKER = Path(__file__).parents[1] / "support" / "replica_worker.py"
SCHEDULES = 2000
MINUTES = 6
REPLICAS = 4


def start_worker(url: str, index: int) -> subprocess.Popen[str]:
    # Replicas tick as the scheduler login. Named connections let the test see, in
    # pg_stat_activity, when a replica is mid-tick.
    url = os.environ.get("ALMANAC_SCHEDULER_DATABASE_URL") or url
    named = make_url(url).update_query_dict({"application_name": f"replica{index}"})
    command = [sys.executable, str(WORKER), named.render_as_string(hide_password=False), "40"]
    process = subprocess.Popen(
        command,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready", process.stderr.read()
    return process


def clone_schedules(h, engine, count: int) -> None:
    """One schedule saved through the API, copied `count - 1` times with Core (as the owner)."""
    h.create("r0000", cron="* * * * *", overlap_policy="allow_all")
    with engine.begin() as conn:
        template = dict(conn.execute(select(Schedule.__table__)).mappings().one())
        template.pop("id")
        rows = [
            template
            | {"uid": f"00000000-0000-4000-8000-{index:012d}", "schedule_id": f"r{index:04d}"}
            for index in range(1, count)
        ]
        conn.execute(insert(Schedule.__table__), rows)


def wait_until(predicate, timeout: float = 60.0) -> None:
    """Poll the database (not the clock) until the replicas have done their work."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "replicas did not finish in time"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"])
def test_four_replicas_one_killed_mid_tick_start_every_occurrence_once(
    h, db_url, postgres_owner_url
):
    # The owner reads past row security: the test counts every namespace's rows.
    engine = make_engine(postgres_owner_url)
    clone_schedules(h, engine, SCHEDULES)
    workers = [start_worker(db_url, index) for index in range(REPLICAS)]

    def scalar(sql: str, **params):
        with engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def caught_up() -> bool:
        return (
            scalar(
                "SELECT count(*) FROM schedules WHERE status = 'active' "
                "AND next_fire_at <= (SELECT now FROM clock_state)"
            )
            == 0
        )

    killed = False
    try:
        for minute in range(1, MINUTES + 1):
            h.set_clock(FIXED_NOW + timedelta(minutes=minute))
            if minute == 3:
                # Kill a replica while the replicas are busy with this minute's firings.
                wait_until(lambda: scalar("SELECT count(*) FROM runs") > SCHEDULES * 2 + 50)
                wait_until(
                    lambda: (
                        scalar(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'replica0' AND xact_start IS NOT NULL"
                        )
                        > 0
                    )
                )
                workers[0].send_signal(signal.SIGKILL)
                workers[0].wait()
                killed = scalar("SELECT count(*) FROM runs") < SCHEDULES * 3
                workers[0] = start_worker(db_url, 0)
            wait_until(caught_up)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
    assert killed
    expected = SCHEDULES * MINUTES
    assert scalar("SELECT count(*) FROM runs") == expected
    assert scalar("SELECT count(DISTINCT run_id) FROM runs") == expected
    # Every schedule started exactly its six occurrences: one ledger row each, nothing skipped.
    assert scalar("SELECT count(*) FROM schedule_occurrences WHERE kind = 'started'") == expected
    assert scalar("SELECT count(*) FROM schedule_occurrences WHERE kind <> 'started'") == 0
    assert (
        scalar(
            "SELECT count(*) FROM (SELECT schedule_pk, instant FROM schedule_occurrences "
            "GROUP BY schedule_pk, instant HAVING count(*) > 1) AS doubled"
        )
        == 0
    )
    assert scalar("SELECT min(fires_count) FROM schedules") == MINUTES
    assert scalar("SELECT max(fires_count) FROM schedules") == MINUTES
    # Every run begins with exactly one ScheduleTriggered; the audit stream has one per run.
    assert (
        scalar(
            "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM run_history_events e "
            "WHERE e.run_pk = r.id AND e.event_type = 'ScheduleTriggered') <> 1"
        )
        == 0
    )
    assert (
        scalar(
            "SELECT count(*) FROM run_history_events WHERE sequence = 1 "
            "AND event_type = 'ScheduleTriggered'"
        )
        == expected
    )
    assert (
        scalar(
            "SELECT count(*) FROM schedule_history_events WHERE event_type = 'ScheduleTriggered'"
        )
        == expected
    )
    assert (
        scalar("SELECT count(*) FROM runs r JOIN schedule_occurrences o ON o.run_id = r.run_id")
        == expected
    )
