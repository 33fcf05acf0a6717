"""longer branch paths

A branch's `path` joins a `parallel_id/branch_id` pair per level of nesting. Deploy accepts four
levels of parallel steps and ids of 128 characters, which make paths of 1,031 characters, but
the column held 1,024: on PostgreSQL such a run's first claim failed with "value too long",
again at every claim, while SQLite (which does not enforce the length) ran it. The column now
holds 2,048. On PostgreSQL widening a varchar changes only the catalog (no table rewrite); on
SQLite the table is rebuilt with its rows. A downgrade fails if a stored path is longer than
1,024 characters.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

REQUIRES = {"own": ("run_branches",)}


def upgrade() -> None:
    with op.batch_alter_table("run_branches", schema=None) as batch_op:
        batch_op.alter_column(
            "path", existing_type=sa.String(1024), type_=sa.String(2048), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("run_branches", schema=None) as batch_op:
        batch_op.alter_column(
            "path", existing_type=sa.String(2048), type_=sa.String(1024), existing_nullable=False
        )
