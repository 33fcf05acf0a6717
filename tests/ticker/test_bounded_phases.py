"""Bounded tick phases on PostgreSQL: a stuck namespace costs its lock timeout, not the tick.

Another connection holds locks the ticker needs; the phase that meets them fails (or skips),
is logged with its cause, consumes no occurrence, and the other namespace still fires.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, select, text

from app.context import ticker_database
from app.db import Database, Namespace, normalize_url
from app.db.rls import Scope
from app.schedules.tick import buffers, due
from app.ticker import rotation
from app.ticker.host import warn_if_discovery_refused
from app.ticker.tick import run_tick, ticker_id
from tests.conftest import make_test_app
from tests.support.schedules_harness import Harness

RUN_ID = "schedule:s:20260105T120500Z"
# Lock and statement timeouts are PostgreSQL's.
pytestmark = pytest.mark.parametrize("backend", ["postgres"])


@pytest.fixture
def h(app, admin_api):
    harness = Harness(app, admin_api)
    for namespace in ("alpha", "beta"):
        harness.workflow(name="flow", namespace=namespace)
        body = {"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "flow"}, "input": {}}
        response = admin_api.post(f"/namespaces/{namespace}/schedules", json=body)
        assert response.status_code == 201, response.get_json()
    harness.set_clock("12:05")
    return harness


@pytest.fixture
def owner(postgres_owner_url):
    engine = create_engine(normalize_url(postgres_owner_url))
    yield engine
    engine.dispose()


def _ledger(h: Harness, namespace: str) -> list[dict]:
    body = h.api.get(f"/namespaces/{namespace}/schedules/s/occurrences").get_json()
    return body["items"]


def _cursor(h: Harness, namespace: str) -> str | None:
    return h.api.get(f"/namespaces/{namespace}/schedules/s").get_json()["next_fire_at"]


def test_a_locked_schedule_row_is_left_for_the_next_tick_and_others_fire(h, owner):
    before = _cursor(h, "alpha")
    with owner.connect() as conn:
        conn.execute(
            text(
                "SELECT s.id FROM schedules s JOIN namespaces n ON n.id = s.namespace_id "
                "WHERE n.name = 'alpha' FOR UPDATE"
            )
        )
        rows = h.tick()
        assert [(r["namespace"], r["outcome"]) for r in rows] == [("beta", "triggered")]
        assert _ledger(h, "alpha") == [] and _cursor(h, "alpha") == before
        conn.rollback()
    rows = h.tick()
    assert [(r["namespace"], r["run_id"]) for r in rows] == [("alpha", RUN_ID)]


def test_a_phase_stuck_on_a_lock_fails_alone_and_consumes_no_occurrence(h, owner, caplog):
    before = _cursor(h, "alpha")
    with owner.connect() as conn:
        # An uncommitted run with the id alpha's firing will insert: that insert must wait.
        conn.execute(
            text(
                "INSERT INTO runs (uid, namespace_id, run_id, workflow_id, workflow_version_id, "
                "status, input, step_index, step_outputs, attempt, labels, memo, "
                "search_attributes, last_sequence, created_at) "
                "SELECT gen_random_uuid()::text, n.id, :run_id, w.id, v.id, 'pending', '{}', 0, "
                "'{}', 0, '{}', '{}', '{}', 0, now() FROM namespaces n "
                "JOIN workflows w ON w.namespace_id = n.id "
                "JOIN workflow_versions v ON v.workflow_id = w.id WHERE n.name = 'alpha'"
            ),
            {"run_id": RUN_ID},
        )
        with caplog.at_level(logging.WARNING, logger="app.ticker.rotation"):
            result_rows = h.tick()
        assert [(r["namespace"], r["outcome"]) for r in result_rows] == [("beta", "triggered")]
        failure = [r for r in caplog.records if "fire_due_schedules" in r.getMessage()]
        assert len(failure) == 1 and "LockNotAvailable" in failure[0].getMessage()
        # A lock held too long is no bug: one warning line, no traceback.
        assert failure[0].levelno == logging.WARNING and failure[0].exc_info is None
        assert _ledger(h, "alpha") == [] and _cursor(h, "alpha") == before
        conn.rollback()
    rows = h.tick()
    assert [(r["namespace"], r["run_id"]) for r in rows] == [("alpha", RUN_ID)]
    assert [item["kind"] for item in _ledger(h, "alpha")] == ["started"]


def test_a_ticker_on_the_app_login_may_not_discover_and_says_so(h, db_url):
    from app.ticker.tick import run_tick
    from tests.conftest import make_test_app

    app = make_test_app(db_url, SCHEDULER_DATABASE_URL=None)
    result = run_tick(app)
    assert result.rows == []
    assert [f["phase"] for f in result.failures] == ["discovery"]
    assert result.failures[0]["cause"].startswith("InsufficientPrivilege: permission denied")
    assert "run the ticker as almanac_scheduler" in result.failures[0]["cause"]
    # Nothing was consumed: the right login fires both namespaces.
    assert sorted(r["namespace"] for r in h.tick()) == ["alpha", "beta"]


def _beat(owner) -> object:
    with owner.connect() as conn:
        return conn.scalar(
            text("SELECT last_tick_at FROM ticker_beats WHERE ticker_id = :id"), {"id": ticker_id()}
        )


def test_a_ticker_that_may_not_discover_records_no_beat_and_its_cli_tick_fails(
    h, db_url, owner, caplog
):
    app = make_test_app(db_url, SCHEDULER_DATABASE_URL=None)
    problem = rotation.discovery_refused(ticker_database(app))
    assert problem is not None and "almanac_app may not call almanac_due_namespaces" in problem
    assert rotation.discovery_refused(ticker_database(h.app)) is None
    # What the ticker's host (web process or `scheduler run`) logs as it starts.
    with caplog.at_level(logging.ERROR, logger="app.ticker.host"):
        warn_if_discovery_refused(app)
    assert [r.getMessage() for r in caplog.records if r.name == "app.ticker.host"] == [problem]

    before = _beat(owner)
    result = app.test_cli_runner().invoke(args=["scheduler", "tick", "--json"])
    assert result.exit_code == 1
    printed = json.loads(next(line for line in result.output.splitlines() if line[:1] == "{"))
    assert [f["phase"] for f in printed["failures"]] == ["discovery"]
    text_mode = app.test_cli_runner().invoke(args=["scheduler", "tick"])
    assert text_mode.exit_code == 1
    assert "failed: discovery: InsufficientPrivilege" in text_mode.output
    # No sign of life from a tick that reached nothing, so /health turns degraded in time.
    assert _beat(owner) == before

    assert sorted(r["namespace"] for r in h.tick()) == ["alpha", "beta"]
    assert _beat(owner) not in (None, before)
    ok = h.app.test_cli_runner().invoke(args=["scheduler", "tick"])
    assert ok.exit_code == 0, ok.output


def _holding(owner, statement: str):
    """A connection holding the locks `statement` takes; PostgreSQL ends it after 10 s idle,
    so code that waits on it without a lock timeout stalls 10 s and then goes on unnamed."""
    conn = owner.connect()
    conn.execute(text("SET idle_in_transaction_session_timeout = '10s'"))
    conn.execute(text(statement))
    return conn


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM scheduler_cursors FOR UPDATE",
        "LOCK TABLE runs IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE schedules IN ACCESS EXCLUSIVE MODE",
    ],
)
def test_discovery_held_up_by_a_lock_fails_named_instead_of_stalling_every_ticker(
    h, owner, caplog, statement
):
    from app.ticker.tick import run_tick

    h.tick()  # the rotation's cursor row exists from the first discovery on
    h.set_clock("12:10")
    conn = _holding(owner, statement)
    try:
        with caplog.at_level(logging.WARNING, logger="app.ticker.rotation"):
            result = run_tick(h.app)
        assert result.rows == []
        assert [f["phase"] for f in result.failures] == ["discovery"], result.failures
        assert "LockNotAvailable" in result.failures[0]["cause"]
        [record] = [r for r in caplog.records if "discovery" in r.getMessage()]
        assert record.levelno == logging.WARNING
    finally:
        conn.rollback()
        conn.close()
    # Nothing was consumed: the next tick fires both namespaces' 12:10.
    assert sorted(r["namespace"] for r in h.tick()) == ["alpha", "beta"]


def test_a_beat_row_locked_elsewhere_is_a_named_failure_after_the_work_is_done(h, owner):
    from app.ticker.tick import run_tick

    h.tick()
    h.set_clock("12:10")
    conn = _holding(
        owner, f"SELECT * FROM ticker_beats WHERE ticker_id = '{ticker_id()}' FOR UPDATE"
    )
    try:
        result = run_tick(h.app)
        assert sorted(r["namespace"] for r in result.rows) == ["alpha", "beta"]
        assert [f["phase"] for f in result.failures] == ["beat"], result.failures
        assert "LockNotAvailable" in result.failures[0]["cause"]
    finally:
        conn.rollback()
        conn.close()


def test_a_first_beat_written_at_once_by_another_tick_of_this_process_is_updated(h, owner):
    """Two ticks of one process (several `/admin/tick` at once) may write its first beat
    together: the second updates the row the first inserted instead of failing its beat."""
    h.set_clock("12:10")
    other = owner.connect()
    other.execute(
        text(
            "INSERT INTO ticker_beats (ticker_id, last_tick_at, last_tick_clock, duration_ms) "
            "VALUES (:id, now(), now() - interval '1 day', 1)"
        ),
        {"id": ticker_id()},
    )
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", run_tick(h.app)))
    thread.start()
    try:
        waiting = text("SELECT count(*) FROM pg_locks WHERE NOT granted")
        with owner.connect() as probe:
            for _ in range(500):
                if probe.scalar(waiting) or not thread.is_alive():
                    break
                time.sleep(0.002)
            assert probe.scalar(waiting) == 1  # the beat waits for the other insert
    finally:
        other.commit()
        other.close()
    thread.join()
    result = box["result"]
    assert {r["namespace"] for r in result.rows} == {"alpha", "beta"}
    assert result.failures == []
    with owner.connect() as conn:
        (clock,) = conn.execute(
            text("SELECT last_tick_clock FROM ticker_beats WHERE ticker_id = :id"),
            {"id": ticker_id()},
        ).one()
    assert clock.isoformat() == "2026-01-05T12:10:00+00:00"


def test_a_turn_bound_to_one_namespace_fires_only_there_for_a_login_past_row_security(
    h, postgres_owner_url
):
    """The tick runs each namespace's phases bound to it. A ticker login that bypasses row
    security (a superuser) saw every namespace in each turn, so one turn fired the others'
    schedules too, and a refusal for capacity was decided again in every namespace's turn."""
    superuser = Database(postgres_owner_url)
    try:
        with superuser.session(Scope(everything=True)) as session:
            alpha = session.scalar(select(Namespace.id).where(Namespace.name == "alpha"))
        assert alpha is not None
        bound = superuser.bound(Scope.of([alpha]))
        now = datetime(2026, 1, 5, 12, 5, tzinfo=UTC)
        rows = due.fire_due(bound, now, timedelta(minutes=1), budget_deadline=time.monotonic() + 5)
        assert [(r["namespace"], r["outcome"]) for r in rows] == [("alpha", "triggered")]
        assert buffers.drain(bound, now, budget_deadline=time.monotonic() + 5) == []
    finally:
        superuser.dispose()
    assert len(_ledger(h, "alpha")) == 1 and _ledger(h, "beta") == []
    # Beta's turn, as the tick takes it, still fires beta's.
    assert [(r["namespace"], r["outcome"]) for r in h.tick()] == [("beta", "triggered")]
