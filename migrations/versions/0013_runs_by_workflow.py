"""runs by workflow and creation time

`GET /runs?workflow=` (and the console's runs filter) lists one workflow's runs newest first.
Without an index it walked the namespace's runs newest first until it found a page of that
workflow's: a workflow that last ran a month ago in a busy namespace read every run since
(170 ms for 400,000 runs on PostgreSQL, growing with the table). The index reads the page
directly. Building it takes a write lock on `runs` for as long as the build: about a second per
million runs.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

REQUIRES = {"own": ("runs",)}


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_workflow_created", ["workflow_id", "created_at", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_workflow_created")
