"""The ticker host: APScheduler in the web process with worker threads, the CLI commands."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from app.context import database
from app.db import TickerBeat
from app.ticker import host, tick
from tests.conftest import Api, make_test_app
from tests.support.schedules_harness import Harness

# Run scenarios here end, as in tests/runs, by replaying their runs against the stored state.
pytestmark = pytest.mark.usefixtures("replay_every_run")


def _eventually(condition, seconds: float = 30.0) -> None:
    """Wait (real time) for the background threads to do something."""
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "the background ticker or workers never did it"
        time.sleep(0.05)


def test_scheduler_on_ticks_and_works_in_the_background_and_stops_cleanly(db_url, accounts):
    token = accounts.create("boss", role="admin").token
    app = make_test_app(db_url, SCHEDULER="on", TICK_SECONDS=0.1, WORKER_POLL_SECONDS=0.05)
    try:
        assert app.extensions["almanac.ticker"].running
        assert app.extensions["almanac.workers"].size == 2
        # A second app in the same process does not start a second ticker.
        other = make_test_app(db_url, SCHEDULER="on")
        assert "almanac.ticker" not in other.extensions
        api = Api(app.test_client(), token)
        api.post(
            "/workflows",
            json={
                "name": "bg",
                "steps": [{"id": "a", "type": "action", "action": "echo", "args": 7}],
            },
        )
        api.post("/activations", json={"workflow": "bg"})
        run_id = api.post("/runs", json={"workflow": "bg"}).get_json()["run_id"]
        _eventually(lambda: api.get(f"/runs/{run_id}").get_json()["status"] == "completed")
        _eventually(lambda: api.get("/health").get_json()["ticker"]["last_tick_at"] is not None)
        health = api.get("/health").get_json()
        assert health["ticker"]["enabled"] is True
        assert health["ticker"]["last_tick_at"] is not None
        assert health["ticker"]["lag_seconds"] is not None
    finally:
        scheduler = app.extensions["almanac.ticker"]
        pool = app.extensions["almanac.workers"]
        host.stop()
        database(app).dispose()
    assert not scheduler.running
    assert pool.threads == [] and pool.stopping.is_set()


def test_the_reloader_watcher_and_other_cli_commands_start_no_ticker(db_url, monkeypatch):
    monkeypatch.delenv("WERKZEUG_RUN_MAIN", raising=False)
    app = make_test_app(db_url, SCHEDULER="on", DEBUG=True)
    assert "almanac.ticker" not in app.extensions
    monkeypatch.setenv("FLASK_RUN_FROM_CLI", "true")
    monkeypatch.setattr("sys.argv", ["flask", "--app", "wsgi", "worker"])
    app = make_test_app(db_url, SCHEDULER="on")
    assert "almanac.ticker" not in app.extensions


def test_admin_tick_runs_deadlines_and_work_and_reports_counts(scenario):
    scenario.deploy(
        "w",
        [
            {"id": "a", "type": "action", "action": "noop"},
            {"id": "w", "type": "wait", "duration": "PT1S"},
        ],
    )
    scenario.start("w")
    body = scenario.api.post("/admin/tick", json={"work": True}).get_json()
    assert body["steps"] == 1 and body["deadlines"] == 0 and body["now"] == "2026-01-05T12:00:00Z"
    body = scenario.api.post(
        "/admin/clock", json={"now": "2026-01-05T12:00:01Z", "tick": True, "work": True}
    ).get_json()
    assert body["deadlines"] == 1 and body["steps"] == 0


def test_scheduler_tick_cli_works_and_worker_command_is_registered(runner, scenario):
    scenario.deploy("cli", [{"id": "a", "type": "action", "action": "noop"}])
    scenario.start("cli")
    result = runner.invoke(args=["scheduler", "tick", "--work", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["steps"] == 1
    result = runner.invoke(args=["worker", "--help"])
    assert result.exit_code == 0 and "--queue" in result.output


def test_action_modules_are_loaded_from_the_configuration(db_url, accounts):
    app = make_test_app(db_url, ACTION_MODULES="tests.support.extra_actions")
    api = Api(app.test_client(), accounts.create("dep", role="deployer").token)
    response = api.post(
        "/workflows",
        json={
            "name": "loud",
            "steps": [{"id": "a", "type": "action", "action": "shout", "args": "hi"}],
        },
    )
    assert response.status_code == 201, response.get_json()
    database(app).dispose()


@pytest.fixture
def accounts(db_url):
    from tests.conftest import Accounts

    app = make_test_app(db_url)
    yield Accounts(app)
    database(app).dispose()


@pytest.mark.parametrize(
    ("now", "period", "first"),
    [
        # Just after a whole second: the tick waits for the next one (plus the small margin).
        ("2026-01-05T12:00:00.300000", 1.0, "2026-01-05T12:00:01.050000"),
        # Inside the margin: this second's tick is still ahead.
        ("2026-01-05T12:00:00.010000", 1.0, "2026-01-05T12:00:00.050000"),
        # Exactly on it: the next one, never now.
        ("2026-01-05T12:00:00.050000", 1.0, "2026-01-05T12:00:01.050000"),
        ("2026-01-05T12:00:07.500000", 5.0, "2026-01-05T12:00:10.050000"),
        ("2026-01-05T12:00:00.330000", 0.1, "2026-01-05T12:00:00.350000"),
    ],
)
def test_ticks_fall_on_whole_periods_of_the_wall_clock(now, period, first):
    start = host.aligned_start(datetime.fromisoformat(now).replace(tzinfo=UTC), period)
    expected = datetime.fromisoformat(first).replace(tzinfo=UTC)
    assert abs((start - expected).total_seconds()) < 1e-5, start


def test_the_hosted_ticker_is_aligned_to_the_second(db_url):
    app = make_test_app(db_url, SCHEDULER="on", WORKERS=0)
    try:
        job = app.extensions["almanac.ticker"].get_job("almanac-tick")
        # Every tick of a one-second period falls 50 ms after a whole second of the wall clock.
        assert abs(job.next_run_time.microsecond - 50_000) < 10, job.next_run_time
    finally:
        host.stop()
        database(app).dispose()


def _beat(app) -> datetime | None:
    with database(app).session() as session:
        return session.scalar(
            select(TickerBeat.last_tick_at).where(TickerBeat.ticker_id == tick.ticker_id())
        )


def test_a_tick_whose_every_phase_fails_records_no_beat(app, admin_api, monkeypatch):
    h = Harness(app, admin_api)
    h.workflow(name="flow")
    body = {"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "flow"}, "input": {}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    h.set_clock("12:05")
    before = _beat(app)

    def broken(_ctx: object) -> None:
        raise RuntimeError("the phase broke")

    monkeypatch.setattr(tick, "PHASES", [broken, broken])
    result = tick.run_tick(app)
    assert [f["cause"] for f in result.failures] == ["RuntimeError: the phase broke"] * 2
    assert _beat(app) == before
    monkeypatch.undo()
    # The real phases reach the due schedule, and the beat moves.
    assert [row["schedule_id"] for row in h.tick()] == ["s"]
    assert _beat(app) not in (None, before)


def test_gunicorn_preload_starts_the_ticker_in_each_worker_never_in_the_master(tmp_path):
    # With --preload the master loads the app and forks the workers: a ticker started there
    # was forked mid-step, and a worker that inherited SQLite's allocator lock hung for good.
    import concurrent.futures
    import os
    import signal
    import socket
    import sqlite3
    import subprocess

    import requests

    from tests.live import BIN, ROOT, free_port, wait_until_up

    path = tmp_path / "a.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env |= {"ALMANAC_DATABASE_URL": f"sqlite:///{path}", "ALMANAC_SECRET_KEY": "x"}
    flask = [str(BIN / "flask"), "--app", "wsgi", "db", "upgrade"]
    subprocess.run(flask, cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    port = free_port()
    command = [str(BIN / "gunicorn"), "--preload", "--workers", "2", "--threads", "4"]
    proc = subprocess.Popen(
        [*command, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
        cwd=ROOT,
        env=env | {"ALMANAC_SCHEDULER": "on"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def beating() -> set[str]:
        with sqlite3.connect(path) as conn:
            return {row[0] for row in conn.execute("SELECT ticker_id FROM ticker_beats")}

    try:
        wait_until_up(url, proc)

        def children() -> list[str]:
            return Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()

        # The first worker may answer before the master forked the second (a loaded machine).
        _eventually(lambda: len(children()) == 2)
        workers = children()
        # Each worker ticks under its own name; the master never does.
        expected = {f"{socket.gethostname()}:{pid}" for pid in workers}
        _eventually(lambda: beating() == expected)

        def health(_: int) -> int:
            return requests.get(url + "/api/v1/health", timeout=10).status_code

        with concurrent.futures.ThreadPoolExecutor(24) as pool:
            for _round in range(3):
                assert list(pool.map(health, range(24))) == [200] * 24
        assert f"{socket.gethostname()}:{proc.pid}" not in beating()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    "queue", ["", "bad queue/x", "q" * 65, "q\n"], ids=["empty", "space-slash", "long", "newline"]
)
def test_worker_refuses_a_queue_no_run_can_name(runner, queue, monkeypatch):
    # `--queue ""` fell back to the default queue in silence, and a name the API refuses (422)
    # started a worker waiting on a queue no run can use.
    def started(*_args, **_kwargs):
        raise AssertionError("the worker started")

    monkeypatch.setattr("app.cli.worker.worker_pool", started)
    result = runner.invoke(args=["worker", "--queue", queue])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--queue'" in result.output
    assert "is not a queue name" in result.output
    assert "worker threads on queue" not in result.output
