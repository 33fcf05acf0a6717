"""child policies probe their parent, on every database that went through 0010

An early build's revision 0010 wrapped the namespace policies' settings in init plans but left a
child table's policy (`EXISTS (SELECT 1 FROM parent p WHERE p.id = child.parent_pk)`) as 0008
wrote it; the 0010 that replaced it also added `OFFSET 0`, so each child row is checked by one
primary-key probe of its parent instead of a hash of every visible parent (one schedule's
history page read all 100,000 schedules). A database migrated by that build records 0010 and so
never ran the second form. This revision writes the child policies in their final form again:
where they already are, nothing changes. Which rows a transaction may see and write is the same.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The child tables and their parents as of this revision, written out (a migration must not
# follow later changes to app/db/rls.py).
CHILD_TABLES = {
    "workflow_versions": ("workflow_id", "workflows"),
    "run_history_events": ("run_pk", "runs"),
    "deadlines": ("run_pk", "runs"),
    "signals": ("run_pk", "runs"),
    "run_branches": ("run_pk", "runs"),
    "schedule_revisions": ("schedule_pk", "schedules"),
    "schedule_occurrences": ("schedule_pk", "schedules"),
    "schedule_history_events": ("schedule_pk", "schedules"),
}

REQUIRES = {"own": tuple(CHILD_TABLES)}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, (column, parent) in CHILD_TABLES.items():
        predicate = f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {table}.{column} OFFSET 0)"
        op.execute(
            f"ALTER POLICY namespace_scope ON {table} USING ({predicate}) WITH CHECK ({predicate})"
        )


def downgrade() -> None:
    # 0010 wrote the same policies: going below this revision leaves them as 0010 left them.
    pass
