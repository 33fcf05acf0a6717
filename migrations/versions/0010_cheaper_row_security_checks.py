"""row security reads its settings once per statement and checks a child's parent by its key

The namespace policies of 0008 and 0009 compared each row with
`current_setting('almanac.namespaces')::integer[]`: PostgreSQL evaluated that setting, and
parsed the array, once per row read. Counting 100,000 schedules spent more than half its time
there. Wrapped in scalar subqueries the two settings become init plans, evaluated once per
statement.

A child table's policy (`EXISTS (SELECT 1 FROM parent p WHERE p.id = child.parent_pk)`) let the
planner turn the check into a hash of every visible parent, built for each statement: the first
page of one schedule's history read all 100,000 schedules (36 ms instead of 0.3). `OFFSET 0`
keeps the sub-select from being flattened, so each child row is checked by one primary-key
probe of its parent.

The rule itself (which rows a transaction may see and write) is unchanged.

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

# The tables as of this revision, written out: a migration must not follow later changes to
# app/db/rls.py (which lists the same tables today).
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
TABLES = ("workflows", "activations", "runs", "tasks", "schedules", "run_incidents", "run_rollup")
SCHEDULER_ROLE = "almanac_scheduler"

REQUIRES = {"own": TABLES + tuple(CHILD_TABLES) + ("namespaces",)}

BOUND = "coalesce(nullif(current_setting('almanac.namespaces', true), ''), '{}')::integer[]"
EVERY = "coalesce(current_setting('almanac.all_namespaces', true), '') = 'on'"


def _scope(column: str, once: bool) -> str:
    """`column` is one of the transaction's namespaces, or it may see them all."""
    if once:
        # `= ANY ((SELECT …)::integer[])`: the cast keeps it an array comparison, not
        # `= ANY (subquery)`; each sub-select is an init plan, computed once per statement.
        return f"{column} = ANY ((SELECT {BOUND})::integer[]) OR (SELECT {EVERY})"
    return f"{column} = ANY ({BOUND}) OR {EVERY}"


def _policies(once: bool) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        _alter(table, _scope("namespace_id", once))
    probe = " OFFSET 0" if once else ""
    for table, (column, parent) in CHILD_TABLES.items():
        _alter(table, f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {table}.{column}{probe})")
    op.execute(
        f"ALTER POLICY bound_catalog ON namespaces TO {SCHEDULER_ROLE} USING ({_scope('id', once)})"
    )


def _alter(table: str, predicate: str) -> None:
    op.execute(
        f"ALTER POLICY namespace_scope ON {table} USING ({predicate}) WITH CHECK ({predicate})"
    )


def upgrade() -> None:
    _policies(once=True)


def downgrade() -> None:
    _policies(once=False)
