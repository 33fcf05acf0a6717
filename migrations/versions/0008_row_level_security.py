"""row level security and due-work discovery

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30

On PostgreSQL: forced row-level security with a namespace policy on every namespace-scoped
table, and `almanac_due_namespaces(timestamptz, integer)`, a security-definer function owned by
the catalog-reader role that pages through namespaces with due work from a durable rotating
cursor. SQLite only gets the (unused there) cursor table, so the models match on both.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CATALOG_ROLE = "almanac_catalog"
SCHEDULER_ROLE = "almanac_scheduler"
APP_ROLE = "almanac_app"
FUNCTION = "almanac_due_namespaces(timestamptz, integer)"
BOUND = "coalesce(nullif(current_setting('almanac.namespaces', true), ''), '{}')::integer[]"
EVERY = "coalesce(current_setting('almanac.all_namespaces', true), '') = 'on'"
NAMESPACE_TABLES = ("workflows", "activations", "runs", "tasks", "schedules", "run_incidents")
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
# What the discovery function reads across namespaces (its owner's own policies).
CATALOG_READS = ("schedules", "runs", "deadlines", "run_branches")

# Checked by `db upgrade` before anything changes (app/db/privileges.py).
REQUIRES = {
    "own": NAMESPACE_TABLES + tuple(CHILD_TABLES) + ("namespaces",),
    "member_of": (CATALOG_ROLE,),
    # The catalog role is granted CREATE on the schema for the functions' ownership transfer.
    "grant_create": (CATALOG_ROLE,),
    "roles": (CATALOG_ROLE, SCHEDULER_ROLE, APP_ROLE),
}

DUE_FUNCTION = """
CREATE FUNCTION almanac_due_namespaces(as_of timestamptz, page integer)
RETURNS TABLE (ns_id integer, schedules_due boolean, buffers boolean, deadlines_due boolean,
               leases_expired boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
DECLARE
    size integer := least(greatest(coalesce(page, 16), 1), 16);
    after integer;
    picked integer[];
BEGIN
    INSERT INTO scheduler_cursors (name, last_namespace_id) VALUES ('due', 0)
        ON CONFLICT (name) DO NOTHING;
    -- One caller at a time moves the cursor: concurrent schedulers get different pages.
    SELECT c.last_namespace_id INTO after FROM scheduler_cursors c WHERE c.name = 'due' FOR UPDATE;
    SELECT array_agg(later.id ORDER BY later.id) INTO picked FROM (
        SELECT n.id FROM namespaces n
        WHERE n.id > after AND almanac_namespace_is_due(n.id, as_of)
        ORDER BY n.id LIMIT size) later;
    IF coalesce(array_length(picked, 1), 0) < size THEN
        -- Wrap around to the start of the rotation.
        picked := coalesce(picked, '{}') || ARRAY(
            SELECT n.id FROM namespaces n
            WHERE n.id <= after AND almanac_namespace_is_due(n.id, as_of)
            ORDER BY n.id LIMIT size - coalesce(array_length(picked, 1), 0));
    END IF;
    IF coalesce(array_length(picked, 1), 0) = 0 THEN
        RETURN;
    END IF;
    UPDATE scheduler_cursors SET last_namespace_id = picked[array_length(picked, 1)]
        WHERE scheduler_cursors.name = 'due';
    -- Which phases have work there, so the ticker skips the others.
    RETURN QUERY SELECT p.id,
        EXISTS (SELECT 1 FROM schedules s WHERE s.status = 'active'
                AND s.namespace_id = p.id AND s.next_fire_at <= as_of),
        EXISTS (SELECT 1 FROM schedules s WHERE s.status = 'active'
                AND s.namespace_id = p.id AND s.buffered_count > 0),
        EXISTS (SELECT 1 FROM deadlines d JOIN runs r ON r.id = d.run_pk
                WHERE r.namespace_id = p.id AND d.consumed_at IS NULL AND d.due_at <= as_of),
        EXISTS (SELECT 1 FROM runs r WHERE r.namespace_id = p.id
                AND r.lease_owner IS NOT NULL AND r.lease_expires_at <= as_of)
            OR EXISTS (SELECT 1 FROM run_branches b JOIN runs r ON r.id = b.run_pk
                WHERE r.namespace_id = p.id AND b.lease_owner IS NOT NULL
                AND b.lease_expires_at <= as_of)
        FROM unnest(picked) WITH ORDINALITY AS p(id, ord) ORDER BY p.ord;
END
$fn$
"""

IS_DUE_FUNCTION = """
CREATE FUNCTION almanac_namespace_is_due(ns_id integer, as_of timestamptz)
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, public
AS $fn$
    SELECT EXISTS (SELECT 1 FROM schedules s WHERE s.status = 'active'
                   AND s.namespace_id = ns_id AND s.next_fire_at <= as_of)
        OR EXISTS (SELECT 1 FROM schedules s WHERE s.status = 'active'
                   AND s.namespace_id = ns_id AND s.buffered_count > 0)
        OR EXISTS (SELECT 1 FROM deadlines d JOIN runs r ON r.id = d.run_pk
                   WHERE r.namespace_id = ns_id AND d.consumed_at IS NULL
                   AND d.due_at <= as_of)
        OR EXISTS (SELECT 1 FROM runs r WHERE r.namespace_id = ns_id
                   AND r.lease_owner IS NOT NULL AND r.lease_expires_at <= as_of)
        OR EXISTS (SELECT 1 FROM run_branches b JOIN runs r ON r.id = b.run_pk
                   WHERE r.namespace_id = ns_id AND b.lease_owner IS NOT NULL
                   AND b.lease_expires_at <= as_of)
$fn$
"""


def _secure(table: str, predicate: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY namespace_scope ON {table} FOR ALL "
        f"USING ({predicate}) WITH CHECK ({predicate})"
    )


def upgrade() -> None:
    op.create_table(
        "scheduler_cursors",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("last_namespace_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduler_cursors")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in NAMESPACE_TABLES:
        _secure(table, f"namespace_id = ANY ({BOUND}) OR {EVERY}")
    for table, (column, parent) in CHILD_TABLES.items():
        # The parent's own policy filters the subquery, so a child follows its parent.
        _secure(table, f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {table}.{column})")
    for table in CATALOG_READS:
        op.execute(f"GRANT SELECT ON {table} TO {CATALOG_ROLE}")
        op.execute(
            f"CREATE POLICY catalog_reads ON {table} FOR SELECT TO {CATALOG_ROLE} USING (true)"
        )
    op.execute(f"GRANT SELECT ON namespaces TO {CATALOG_ROLE}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON scheduler_cursors TO {CATALOG_ROLE}")
    # The scheduler login sees only the namespaces its transaction is bound to; the app login
    # and the catalog reader see the whole catalog (not forced: the owner is not filtered).
    op.execute("ALTER TABLE namespaces ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY whole_catalog ON namespaces TO {APP_ROLE}, {CATALOG_ROLE} USING (true)"
    )
    op.execute(
        f"CREATE POLICY bound_catalog ON namespaces FOR SELECT TO {SCHEDULER_ROLE} "
        f"USING (id = ANY ({BOUND}) OR {EVERY})"
    )
    op.execute(IS_DUE_FUNCTION)
    op.execute(DUE_FUNCTION)
    # Only for the ownership transfer: the new owner needs CREATE on the schema.
    op.execute(f"GRANT CREATE ON SCHEMA public TO {CATALOG_ROLE}")
    op.execute(
        f"ALTER FUNCTION almanac_namespace_is_due(integer, timestamptz) OWNER TO {CATALOG_ROLE}"
    )
    op.execute(f"ALTER FUNCTION {FUNCTION} OWNER TO {CATALOG_ROLE}")
    op.execute(f"REVOKE CREATE ON SCHEMA public FROM {CATALOG_ROLE}")
    op.execute(f"REVOKE ALL ON FUNCTION {FUNCTION} FROM PUBLIC")
    op.execute(f"REVOKE ALL ON FUNCTION almanac_namespace_is_due(integer, timestamptz) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {FUNCTION} TO {SCHEDULER_ROLE}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}")
        op.execute("DROP FUNCTION IF EXISTS almanac_namespace_is_due(integer, timestamptz)")
        for table in CATALOG_READS:
            op.execute(f"DROP POLICY IF EXISTS catalog_reads ON {table}")
            op.execute(f"REVOKE SELECT ON {table} FROM {CATALOG_ROLE}")
        op.execute(f"REVOKE SELECT ON namespaces FROM {CATALOG_ROLE}")
        op.execute("DROP POLICY IF EXISTS whole_catalog ON namespaces")
        op.execute("DROP POLICY IF EXISTS bound_catalog ON namespaces")
        op.execute("ALTER TABLE namespaces DISABLE ROW LEVEL SECURITY")
        for table in NAMESPACE_TABLES + tuple(CHILD_TABLES):
            op.execute(f"DROP POLICY IF EXISTS namespace_scope ON {table}")
            op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.drop_table("scheduler_cursors")
