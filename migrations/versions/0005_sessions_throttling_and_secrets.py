"""console sessions and login throttling

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-30

Secret inputs need no table: they are encrypted inside the existing JSON columns.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    op.create_index("ix_console_sessions_user_id", "console_sessions", ["user_id"])
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_login_failures_username_at", "login_failures", ["username", "attempted_at"]
    )
    op.create_index("ix_login_failures_address_at", "login_failures", ["address", "attempted_at"])


def downgrade() -> None:
    op.drop_index("ix_login_failures_address_at", table_name="login_failures")
    op.drop_index("ix_login_failures_username_at", table_name="login_failures")
    op.drop_table("login_failures")
    op.drop_index("ix_console_sessions_user_id", table_name="console_sessions")
    op.drop_table("console_sessions")
