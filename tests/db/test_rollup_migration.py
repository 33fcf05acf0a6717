"""Migration 0009 fills the runs rollup from the runs already stored (both databases)."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import text

from app.cli.database import alembic_config
from app.db import make_engine

RUNS = [  # (run id, created at, status)
    ("a", datetime(2026, 3, 7, 10, 5, tzinfo=UTC), "completed"),
    ("b", datetime(2026, 3, 7, 10, 59, 59, tzinfo=UTC), "failed"),
    ("c", datetime(2026, 3, 7, 11, 0, tzinfo=UTC), "running"),
    ("d", datetime(2026, 3, 7, 11, 30, tzinfo=UTC), "waiting"),
    ("e", datetime(2026, 3, 7, 11, 45, tzinfo=UTC), "completed"),
]


def _stamp(value: datetime, dialect: str) -> object:
    # SQLite keeps naive UTC text, as the app's column type writes it.
    return value.replace(tzinfo=None).isoformat(" ") if dialect == "sqlite" else value


def _utc_text(hour: object) -> str:
    if isinstance(hour, datetime):  # PostgreSQL: in the session's time zone
        return hour.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return str(hour)[:16]


def test_upgrade_counts_the_existing_runs(empty_owner_url):
    config = alembic_config(empty_owner_url)
    command.upgrade(config, "0008")
    engine = make_engine(empty_owner_url)
    dialect = engine.dialect.name
    with engine.begin() as conn:
        if dialect == "postgresql":
            conn.execute(text("SELECT set_config('almanac.all_namespaces', 'on', true)"))
        at = _stamp(RUNS[0][1], dialect)
        ns = conn.execute(
            text("INSERT INTO namespaces (name, created_at) VALUES ('n', :at) RETURNING id"),
            {"at": at},
        ).scalar_one()
        flow = conn.execute(
            text(
                "INSERT INTO workflows (namespace_id, name, created_at) "
                "VALUES (:ns, 'w', :at) RETURNING id"
            ),
            {"ns": ns, "at": at},
        ).scalar_one()
        version = conn.execute(
            text(
                "INSERT INTO workflow_versions (workflow_id, version, definition, created_at) "
                "VALUES (:flow, 1, '{}', :at) RETURNING id"
            ),
            {"flow": flow, "at": at},
        ).scalar_one()
        for run_id, created, status in RUNS:
            conn.execute(
                text(
                    "INSERT INTO runs (uid, namespace_id, run_id, workflow_id, workflow_version_id,"
                    " status, input, step_index, step_outputs, attempt, labels, memo,"
                    " search_attributes, last_sequence, created_at) VALUES (:uid, :ns, :run_id,"
                    " :flow, :version, :status, '{}', 0, '{}', 0, '{}', '{}', '{}', 0, :at)"
                ),
                {
                    "uid": f"uid-{run_id}",
                    "ns": ns,
                    "run_id": run_id,
                    "flow": flow,
                    "version": version,
                    "status": status,
                    "at": _stamp(created, dialect),
                },
            )
    command.upgrade(config, "head")
    with engine.begin() as conn:
        if dialect == "postgresql":
            conn.execute(text("SELECT set_config('almanac.all_namespaces', 'on', true)"))
        rows = conn.execute(
            text("SELECT hour, state, sum(runs) FROM run_rollup GROUP BY hour, state")
        ).all()
    engine.dispose()
    found = {(str(hour)[:16].replace("T", " "), state): int(n) for hour, state, n in rows if n}
    assert found == {
        ("2026-03-07 10:00", "completed"): 1,
        ("2026-03-07 10:00", "failed"): 1,
        ("2026-03-07 11:00", "active"): 2,
        ("2026-03-07 11:00", "completed"): 1,
    }
