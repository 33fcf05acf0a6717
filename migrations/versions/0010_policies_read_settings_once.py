"""row security reads its settings once per statement

The namespace policies of 0008 and 0009 compared each row with
`current_setting('almanac.namespaces')::integer[]`: PostgreSQL evaluated that setting, and
parsed the array, once per row read. Counting 100,000 schedules spent more than half its time
there. Wrapped in scalar subqueries the two settings become init plans, evaluated once per
statement; the rule itself (which rows a transaction may see and write) is unchanged.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("workflows", "activations", "runs", "tasks", "schedules", "run_incidents", "run_rollup")
SCHEDULER_ROLE = "almanac_scheduler"

REQUIRES = {"own": TABLES + ("namespaces",)}

BOUND = "coalesce(nullif(current_setting('almanac.namespaces', true), ''), '{}')::integer[]"
EVERY = "coalesce(current_setting('almanac.all_namespaces', true), '') = 'on'"

# `= ANY ((SELECT ...)::integer[])`: the cast keeps it an array comparison, not `= ANY (subquery)`.
ONCE = f"namespace_id = ANY ((SELECT {BOUND})::integer[]) OR (SELECT {EVERY})"
PER_ROW = f"namespace_id = ANY ({BOUND}) OR {EVERY}"


def _policies(predicate: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(
            f"ALTER POLICY namespace_scope ON {table} USING ({predicate}) WITH CHECK ({predicate})"
        )
    catalog = predicate.replace("namespace_id", "id")
    op.execute(f"ALTER POLICY bound_catalog ON namespaces TO {SCHEDULER_ROLE} USING ({catalog})")


def upgrade() -> None:
    _policies(ONCE)


def downgrade() -> None:
    _policies(PER_ROW)
