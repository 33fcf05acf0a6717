"""The PostgreSQL logins Almanac runs as, and what each may do (docs/postgres.md).

- `almanac_app` (web, API, workers): reads and writes every table, business rows only through
  row-level security; owns nothing, `NOBYPASSRLS`.
- `almanac_scheduler` (the ticker): the same business tables under row-level security, reads
  the accounts it checks principals against (not their password hashes), and alone may call the
  due-work function.
- `almanac_catalog` (no login): owns that function and may read across namespaces only what
  it needs to find due work.

Everything here is idempotent: run it again after an upgrade and it grants what is new.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from app.db import rls

APP_ROLE = "almanac_app"
SCHEDULER_ROLE = "almanac_scheduler"
CATALOG_ROLE = "almanac_catalog"

_ATTRIBUTES = "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
ROLES = {
    APP_ROLE: f"LOGIN {_ATTRIBUTES}",
    SCHEDULER_ROLE: f"LOGIN {_ATTRIBUTES}",
    CATALOG_ROLE: f"NOLOGIN {_ATTRIBUTES}",
}
_DML = "SELECT, INSERT, UPDATE, DELETE"
BUSINESS_TABLES = rls.NAMESPACE_TABLES + tuple(rls.CHILD_TABLES)
# Per login: table -> privileges. Business tables are filtered by row-level security.
APP_GRANTS = {table: _DML for table in BUSINESS_TABLES} | {
    "namespaces": _DML,
    "users": _DML,
    "memberships": _DML,
    "api_tokens": _DML,
    "clock_state": _DML,
    "ticker_beats": _DML,
    # Console sign-in: server-side sessions and the login throttle's failures.
    "console_sessions": _DML,
    "login_failures": _DML,
}
SCHEDULER_GRANTS = {table: _DML for table in BUSINESS_TABLES} | {
    "namespaces": "SELECT",
    "memberships": "SELECT",
    "clock_state": "SELECT",
    "ticker_beats": _DML,
}
# Per login: table -> the columns it may read. The scheduler reads the principals it checks,
# not their password hashes, nor the name of the namespace each last used (namespace names
# reach it only in a transaction bound to that namespace).
SCHEDULER_COLUMNS: dict[str, tuple[str, ...]] = {
    "users": ("id", "username", "is_superuser", "disabled_at", "created_at"),
}


def _existing_tables(conn: Connection) -> set[str]:
    rows = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))
    return {row[0] for row in rows}


def create_roles(conn: Connection) -> list[str]:
    """Create the three roles, or bring their attributes back to these; say what was done."""
    done = []
    for role, attributes in ROLES.items():
        exists = conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role})
        verb = "ALTER" if exists else "CREATE"
        conn.execute(text(f'{verb} ROLE "{role}" {attributes}'))
        done.append(f"{'updated' if exists else 'created'} role {role} ({attributes})")
    return done


def _roles_exist(conn: Connection) -> bool:
    return all(
        conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": r}) for r in ROLES
    )


def grant_tables(conn: Connection) -> tuple[str, ...]:
    """The tables `grant_privileges` grants (only their owner may), once the logins it grants
    them to exist (before, it grants nothing). Those not created yet are skipped by the check."""
    if conn.dialect.name != "postgresql" or not _roles_exist(conn):
        return ()
    return tuple(sorted(set(APP_GRANTS) | set(SCHEDULER_GRANTS) | set(SCHEDULER_COLUMNS)))


def grant_privileges(conn: Connection) -> list[str]:
    """Grant each login its tables (those that exist now), sequences and schema usage."""
    if not _roles_exist(conn):
        return []
    tables = _existing_tables(conn)
    done = []
    for role, grants in ((APP_ROLE, APP_GRANTS), (SCHEDULER_ROLE, SCHEDULER_GRANTS)):
        conn.execute(text(f'GRANT USAGE ON SCHEMA public TO "{role}"'))
        granted = sorted(table for table in grants if table in tables)
        for table in granted:
            conn.execute(text(f'GRANT {grants[table]} ON "{table}" TO "{role}"'))
        if role == SCHEDULER_ROLE:
            _grant_columns(conn, role, SCHEDULER_COLUMNS, tables)
        if _owns_version_table(conn):
            # Read at every start, to refuse a database an index-only revision behind.
            conn.execute(text(f'GRANT SELECT ON alembic_version TO "{role}"'))
        sequences = _grant_sequences(conn, role, grants)
        done.append(f"granted {role} {len(granted)} tables and {sequences} of their sequences")
    return done


def _owns_version_table(conn: Connection) -> bool:
    """Whether this login owns `alembic_version` (only its owner may grant it)."""
    return bool(
        conn.scalar(
            text(
                "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename = 'alembic_version' AND tableowner = current_user"
            )
        )
    )


def table_sequences(conn: Connection) -> list[tuple[str, str]]:
    """(sequence, table) of every sequence a table's id column owns (serial or identity)."""
    rows = conn.execute(
        text(
            "SELECT s.relname, t.relname FROM pg_class s "
            "JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid "
            "AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') "
            "JOIN pg_class t ON t.oid = d.refobjid "
            "WHERE s.relkind = 'S' AND s.relnamespace = current_schema()::regnamespace"
        )
    ).all()
    return [(str(sequence), str(table)) for sequence, table in rows]


def _grant_sequences(conn: Connection, role: str, grants: dict[str, str]) -> int:
    """USAGE on the sequence of each table `role` may insert into, and on no other sequence
    (an earlier version granted them all: the scheduler could count, or use up, the ids of
    users, API tokens and console sessions). Returns how many it holds."""
    held = 0
    for sequence, table in table_sequences(conn):
        if "INSERT" in grants.get(table, ""):
            conn.execute(text(f'GRANT USAGE ON SEQUENCE "{sequence}" TO "{role}"'))
            held += 1
        else:
            conn.execute(text(f'REVOKE ALL ON SEQUENCE "{sequence}" FROM "{role}"'))
    return held


def _grant_columns(
    conn: Connection, role: str, columns: dict[str, tuple[str, ...]], tables: set[str]
) -> None:
    """SELECT on these columns (those that exist now) and on no other: a whole-table grant an
    earlier version made is taken back first."""
    for table, names in columns.items():
        if table not in tables:
            continue
        existing = set(
            conn.scalars(
                text(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = :t"
                ),
                {"t": table},
            )
        )
        readable = ", ".join(f'"{name}"' for name in names if name in existing)
        conn.execute(text(f'REVOKE SELECT ON "{table}" FROM "{role}"'))
        conn.execute(text(f'GRANT SELECT ({readable}) ON "{table}" TO "{role}"'))
