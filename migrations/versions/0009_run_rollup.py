"""runs per namespace, hour and state

The overview's chart of the last 24 hours read every run of the window; `run_rollup` keeps the
same counts as runs are created and end (app/db/rollup.py). Filled here from the runs already
stored. On PostgreSQL it gets the namespace policy of every namespace table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

REQUIRES = {"own": ("runs", "namespaces")}

BOUND = "coalesce(nullif(current_setting('almanac.namespaces', true), ''), '{}')::integer[]"
EVERY = "coalesce(current_setting('almanac.all_namespaces', true), '') = 'on'"
STRIPES = 8
HOUR = {
    "postgresql": "date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
    "sqlite": "strftime('%Y-%m-%d %H:00:00.000000', created_at)",
}
STATE = (
    "CASE WHEN status IN ('pending', 'running', 'waiting', 'suspended') THEN 'active' "
    "ELSE status END"
)


def upgrade() -> None:
    op.create_table(
        "run_rollup",
        sa.Column("namespace_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stripe", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_run_rollup_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("namespace_id", "hour", "state", "stripe", name=op.f("pk_run_rollup")),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        # The runs table's policy is forced on its owner too: read every namespace for the fill.
        op.execute("SELECT set_config('almanac.all_namespaces', 'on', true)")
    hour = HOUR["postgresql" if dialect == "postgresql" else "sqlite"]
    op.execute(
        "INSERT INTO run_rollup (namespace_id, hour, state, stripe, runs) "
        f"SELECT namespace_id, {hour}, {STATE}, id % {STRIPES}, count(*) FROM runs "
        f"GROUP BY namespace_id, {hour}, {STATE}, id % {STRIPES}"
    )
    if dialect == "postgresql":
        predicate = f"namespace_id = ANY ({BOUND}) OR {EVERY}"
        op.execute("ALTER TABLE run_rollup ENABLE ROW LEVEL SECURITY")
        op.execute("ALTER TABLE run_rollup FORCE ROW LEVEL SECURITY")
        op.execute(
            "CREATE POLICY namespace_scope ON run_rollup FOR ALL "
            f"USING ({predicate}) WITH CHECK ({predicate})"
        )


def downgrade() -> None:
    op.drop_table("run_rollup")
