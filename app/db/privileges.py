"""What a login needs before `db upgrade` may change anything (docs/postgres.md).

Each pending revision may declare `REQUIRES = {"own": tables, "member_of": roles, "roles":
roles that must exist, "grant_create": roles it lets create in the schema}`; every revision
needs `CREATE` on the schema (with the grant option for `grant_create`). The check only reads the
catalogs, so a refused upgrade leaves the schema and `alembic_version` exactly as they were.
Nothing here grants anything: the operator decides who holds what.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, text

from app.db.roles import APP_ROLE, SCHEDULER_ROLE

# The logins the processes run as: never the ones to migrate with.
PROCESS_LOGINS = frozenset({APP_ROLE, SCHEDULER_ROLE})


def _merged(requirements: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {
        "own": set(),
        "member_of": set(),
        "roles": set(),
        "grant_create": set(),
    }
    for each in requirements:
        for key in merged:
            merged[key].update(each.get(key, ()))
    return merged


def _missing_roles(conn: Connection, roles: set[str]) -> list[str]:
    return [
        f"role {role} does not exist (run `flask --app wsgi db create-roles` first)"
        for role in sorted(roles)
        if not conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role})
    ]


def _missing_ownership(conn: Connection, tables: set[str]) -> list[str]:
    missing = []
    for table in sorted(tables):
        owner = conn.scalar(
            text(
                "SELECT tableowner FROM pg_tables "
                "WHERE schemaname = current_schema() AND tablename = :t"
            ),
            {"t": table},
        )
        # A table a revision creates first is owned by whoever runs it.
        if owner is None:
            continue
        held = conn.scalar(text("SELECT pg_has_role(current_user, :o, 'USAGE')"), {"o": owner})
        if not held:
            missing.append(f"ownership of table {table} (owned by {owner})")
    return missing


def _login(conn: Connection) -> str:
    """The current login, quoted as a role name in SQL."""
    return str(conn.scalar(text("SELECT quote_ident(current_user)")))


def _missing_memberships(conn: Connection, roles: set[str]) -> list[str]:
    """Membership that passes on the role's privileges: a NOINHERIT login is a member in name
    only, and PostgreSQL refuses it what the role owns (the upgrade replaces its functions)."""
    missing = []
    for role in sorted(roles):
        exists = conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role})
        if not exists or conn.scalar(
            text("SELECT pg_has_role(current_user, :r, 'USAGE')"), {"r": role}
        ):
            continue
        if conn.scalar(text("SELECT pg_has_role(current_user, :r, 'MEMBER')"), {"r": role}):
            missing.append(
                f"the privileges of role {role}: this login is a member but does not inherit "
                f"them (NOINHERIT, on it or on a role between it and {role}; a superuser allows "
                f"it: ALTER ROLE {_login(conn)} INHERIT, or on that role)"
            )
            continue
        missing.append(
            f"membership in role {role} (to make it own what the upgrade creates; a "
            f"superuser grants it: GRANT {role} TO {_login(conn)})"
        )
    return missing


def missing_privileges(
    conn: Connection, requirements: Iterable[Mapping[str, Any]], *, also_own: Iterable[str] = ()
) -> list[str]:
    """Everything the current login lacks for revisions with `requirements` and to own the
    tables `also_own` (empty: go ahead). With no revision pending, only `also_own` counts."""
    if conn.dialect.name != "postgresql":
        return []
    requirements = list(requirements)
    merged = _merged(requirements)
    merged["own"].update(also_own)
    missing = []
    if requirements and not conn.scalar(
        text("SELECT has_schema_privilege(current_schema(), 'CREATE')")
    ):
        missing.append("CREATE on schema " + str(conn.scalar(text("SELECT current_schema()"))))
    grantees = sorted(merged["grant_create"])
    if grantees and not conn.scalar(
        text("SELECT has_schema_privilege(current_schema(), 'CREATE WITH GRANT OPTION')")
    ):
        schema = conn.scalar(text("SELECT current_schema()"))
        missing.append(
            f"CREATE WITH GRANT OPTION on schema {schema} (or its ownership), to let "
            f"{', '.join(grantees)} create what it will own"
        )
    missing += _missing_roles(conn, merged["roles"] | merged["member_of"])
    missing += _missing_ownership(conn, merged["own"])
    missing += _missing_memberships(conn, merged["member_of"])
    login = str(conn.scalar(text("SELECT current_user")))
    if missing and login in PROCESS_LOGINS:
        # Granting what is listed would give a process's login the schema (and, through
        # almanac_catalog, every namespace's rows): the remedy is the owner's login instead.
        return [
            f"the schema's ownership: {login} is the login Almanac's processes run as, not the "
            "schema's owner; migrate as the owner (ALMANAC_MIGRATION_DATABASE_URL), and grant "
            f"{login} nothing more"
        ]
    return missing


def unreadable_version(conn: Connection) -> list[str]:
    """What the login lacks to read and move the schema's revision (`alembic_version`), which
    the check itself must read first: empty on SQLite, before the first upgrade, or when held."""
    if conn.dialect.name != "postgresql":
        return []
    owner = conn.scalar(
        text(
            "SELECT tableowner FROM pg_tables "
            "WHERE schemaname = current_schema() AND tablename = 'alembic_version'"
        )
    )
    if owner is None or conn.scalar(
        # Both: with a list, has_table_privilege is true when any one is held, and the
        # process logins hold SELECT (read at their start).
        text(
            "SELECT has_table_privilege('alembic_version', 'SELECT') "
            "AND has_table_privilege('alembic_version', 'UPDATE')"
        )
    ):
        return []
    return [
        f"SELECT and UPDATE on table alembic_version (owned by {owner}; migrate as the "
        "owner: ALMANAC_MIGRATION_DATABASE_URL)"
    ]
