"""runs by namespace and creation time

The overview counts a namespace's runs of the last 24 hours per hour and outcome, the runs list
pages newest first, and a schedule's page lists its newest runs: each reads an index range
instead of scanning every run (the first from the index alone, status included).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_namespace_created",
            ["namespace_id", "created_at", "id", "status"],
            unique=False,
        )
        batch_op.create_index(
            "ix_runs_schedule_created",
            ["namespace_id", "schedule_id", "created_at", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_schedule_created")
        batch_op.drop_index("ix_runs_namespace_created")
