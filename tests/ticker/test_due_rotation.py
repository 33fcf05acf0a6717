"""Due-work discovery on PostgreSQL: 16 namespaces per call from a durable rotating cursor.

2,000 namespaces each hold one schedule due at 12:01. A tick may take 25 discovery pages
(400 namespaces), so the rotation predicts exactly which namespaces each tick serves, in id
order, and that the fifth tick completes the round, even when a new process takes over.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, select, text

from app.context import clock, database
from app.db import Namespace, Schedule, normalize_url
from app.ticker.rotation import PAGE
from app.ticker.tick import run_tick
from tests.conftest import FIXED_NOW, make_test_app
from tests.support.schedules_harness import Harness

NAMESPACES = 2000
PAGES_PER_TICK = 25


def _clone_default_namespace(owner_url: str, copies: int) -> None:
    """Copy the default namespace's workflow and schedule into `copies` new namespaces."""
    columns = [c.name for c in Schedule.__table__.columns if c.name not in {"id", "uid"}]
    copied = ", ".join(
        "n.id" if c == "namespace_id" else f"s.{c}" for c in columns if c != "namespace_id"
    )
    names = ", ".join(c for c in columns if c != "namespace_id")
    statements = [
        "INSERT INTO namespaces (name, created_at) SELECT 'ns-' || lpad(g::text, 4, '0'), now() "
        f"FROM generate_series(1, {copies}) g",
        "INSERT INTO workflows (namespace_id, name, created_at) SELECT n.id, w.name, w.created_at "
        "FROM namespaces n, workflows w WHERE n.name LIKE 'ns-%' AND w.namespace_id = 1",
        "INSERT INTO workflow_versions (workflow_id, version, definition, created_at) "
        "SELECT w.id, v.version, v.definition, v.created_at FROM workflows w, workflow_versions v "
        "WHERE w.namespace_id <> 1 AND v.workflow_id = 1",
        "INSERT INTO activations (id, namespace_id, workflow_id, workflow_version_id, status, "
        "created_at) SELECT gen_random_uuid()::text, w.namespace_id, w.id, v.id, 'ready', now() "
        "FROM workflows w JOIN workflow_versions v ON v.workflow_id = w.id "
        "WHERE w.namespace_id <> 1",
        f"INSERT INTO schedules (uid, namespace_id, {names}) "
        f"SELECT gen_random_uuid()::text, n.id, {copied} FROM schedules s, namespaces n "
        "WHERE s.namespace_id = 1 AND n.name LIKE 'ns-%'",
        "INSERT INTO schedule_revisions (schedule_pk, revision, config, principal_id, created_at) "
        "SELECT c.id, r.revision, r.config, r.principal_id, r.created_at "
        "FROM schedules c, schedule_revisions r, schedules s "
        "WHERE c.namespace_id <> 1 AND s.namespace_id = 1 AND r.schedule_pk = s.id",
    ]
    engine = create_engine(normalize_url(owner_url))
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"])
def test_two_thousand_namespaces_are_served_in_the_ticks_the_rotation_predicts(
    app, admin_api, postgres_owner_url
):
    h = Harness(app, admin_api)
    h.workflow(name="flow")
    h.save({"id": "s", "cron": "* * * * *", "action": {"workflow": "flow"}}, expect=201)
    _clone_default_namespace(postgres_owner_url, NAMESPACES - 1)
    with database(app).session() as session:
        order = list(session.scalars(select(Namespace.name).order_by(Namespace.id)))
    assert len(order) == NAMESPACES
    h.set_clock(FIXED_NOW + timedelta(minutes=1))

    per_tick = PAGE * PAGES_PER_TICK
    served: list[str] = []
    overrides = {"TICK_MAX_NAMESPACE_PAGES": PAGES_PER_TICK, "TICK_BUDGET_SECONDS": 600}
    first = make_test_app(app.config["DATABASE_URL"], **overrides)
    for tick in range(5):
        # The third tick runs in a new process's app: the cursor is in the database.
        ticker = first if tick < 2 else make_test_app(app.config["DATABASE_URL"], **overrides)
        result = run_tick(ticker)
        assert result.failures == []
        names = [row["namespace"] for row in result.rows]
        assert names == order[tick * per_tick : (tick + 1) * per_tick]
        assert {row["outcome"] for row in result.rows} == {"triggered"}
        served += names
    assert sorted(served) == sorted(order)

    # The round is complete: nothing is due until 12:02, when the rotation goes on.
    assert run_tick(first).rows == []
    with database(app).session() as session:
        assert session.scalar(text("SELECT count(*) FROM runs")) == NAMESPACES
    with database(first).session() as session:
        clock(first).set(session, FIXED_NOW + timedelta(minutes=2))  # type: ignore[union-attr]
        session.commit()
    assert len(run_tick(first).rows) == per_tick
