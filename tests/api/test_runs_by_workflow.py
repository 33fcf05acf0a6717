"""The runs list filtered by workflow reads that workflow's runs from its own index."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from sqlalchemy import event, insert, select, text

from app.context import database
from app.db import make_engine
from app.db.runs import Run, Workflow, WorkflowVersion


def _analyze(db_url: str) -> None:
    """Fresh planner statistics, as the owner (PostgreSQL skips tables a login does not own)."""
    engine = make_engine(os.environ.get("ALMANAC_MIGRATION_DATABASE_URL") or db_url)
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    engine.dispose()


def test_one_workflows_runs_are_read_from_its_own_index(app, db_url, admin_api):
    """`?workflow=` reads that workflow's runs directly: a busy workflow's newer runs are not
    walked through to find a quiet one's (the plan names the workflow index on both databases)."""
    admin_api.post(
        "/workflows",
        json={"name": "greet", "steps": [{"id": "a", "type": "action", "action": "echo"}]},
    )
    admin_api.post("/activations", json={"workflow": "greet"})
    for index in range(3):
        admin_api.post(
            "/runs", json={"workflow": "greet", "input": {"who": "q"}, "run_id": f"q{index}"}
        )
    admin_api.post(
        "/workflows",
        json={"name": "busy", "steps": [{"id": "a", "type": "action", "action": "echo"}]},
    )
    admin_api.post("/activations", json={"workflow": "busy"})
    db = database(app)
    with db.session() as session:
        busy = session.scalars(select(Workflow).where(Workflow.name == "busy")).one()
        quiet = session.scalars(select(Run).where(Run.run_id == "q0")).one()
        version = session.scalars(
            select(WorkflowVersion).where(WorkflowVersion.workflow_id == busy.id)
        ).one()
        later = quiet.created_at + timedelta(seconds=1)
        session.execute(
            insert(Run),
            [
                {
                    "namespace_id": quiet.namespace_id,
                    "run_id": f"busy-{index}",
                    "workflow_id": busy.id,
                    "workflow_version_id": version.id,
                    "status": "completed",
                    "created_at": later + timedelta(seconds=index),
                }
                for index in range(3000)
            ],
        )
        session.commit()
    _analyze(db_url)

    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM runs" in statement and "workflows.name" in statement:
            statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", capture)
    try:
        first = admin_api.get("/runs?workflow=greet&limit=2").get_json()
        rest = admin_api.get(
            f"/runs?workflow=greet&limit=2&cursor={first['next_cursor']}"
        ).get_json()
    finally:
        event.remove(db.engine, "before_cursor_execute", capture)
    listed = [r["run_id"] for r in first["items"] + rest["items"]]
    assert listed == ["q2", "q1", "q0"] and rest["next_cursor"] is None
    assert admin_api.get("/runs?workflow=nosuch").get_json()["items"] == []

    assert len(statements) == 2
    explain = "EXPLAIN QUERY PLAN " if db.is_sqlite else "EXPLAIN (COSTS OFF) "
    for statement, parameters in statements:
        with db.engine.connect() as conn:
            plan = conn.exec_driver_sql(explain + statement, parameters).all()
        assert "ix_runs_workflow_created" in " ".join(str(line) for line in plan), plan
