"""Is the database migrated for this code? A process that serves, ticks or works checks at start.

Code started on a database that `db upgrade` has not brought to this version answered every
request "busy, retry" while `/health` said ok, and its ticker wrote into the old tables. Such a
process now stops at start with one line naming what is missing and the command that fixes it.

The check compares the tables and columns of the models with the database's catalog (which
every login may read, whatever its privileges), then the database's revision with the code's
last one: a revision that changed only indexes, row-security policies or column types leaves
every name in place, and is found behind by its number. A database that is ahead of the code (a
newer table or column, a revision this code does not know) passes; so does one whose revision
this login may not read (`db upgrade` grants the logins that read). A database that cannot be
reached is not checked: the process starts and waits for it, as it does for any outage.
"""

from __future__ import annotations

import functools
import logging

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import OperationalError

from app.db import Base
from app.db.roles import APP_GRANTS, table_sequences
from app.db.session import LOCK_CONFLICTS
from app.settings import ROOT, SettingError

log = logging.getLogger(__name__)

# How many missing tables or columns the message names before "and N more".
SHOWN = 4


class SchemaBehind(SettingError):
    """The database lacks tables or columns this code uses."""


# Reading a column's default (`pg_get_expr`) locks its table: a lock held elsewhere (LOCK TABLE,
# a long migration) must not stall every process's start in silence.
CHECK_LIMITS = (
    "SELECT set_config('lock_timeout', '2s', true), set_config('statement_timeout', '5s', true)"
)


def missing(engine: Engine) -> list[str]:
    """The tables and columns of the models that the database does not have."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text(CHECK_LIMITS))
        catalog = inspect(conn)
        tables = set(catalog.get_table_names())
        absent: list[str] = []
        for name, table in Base.metadata.tables.items():
            if name not in tables:
                absent.append(f"table {name}")
                continue
            have = {column["name"] for column in catalog.get_columns(name)}
            absent.extend(f"column {name}.{c.name}" for c in table.columns if c.name not in have)
    return absent


MIGRATIONS = ROOT / "migrations"


@functools.cache
def _revisions() -> tuple[str, frozenset[str]]:
    """The code's last revision and every revision it knows (read once per process)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(config)
    known = frozenset(revision.revision for revision in script.walk_revisions())
    return str(script.get_current_head()), known


def _database_revisions(conn: Connection) -> list[str]:
    """The revisions in `alembic_version`; none when there is no such table or this login may
    not read it (a database migrated before `db upgrade` granted the logins that)."""
    if conn.dialect.name == "postgresql":
        readable = conn.scalar(
            text(
                "SELECT to_regclass('alembic_version') IS NOT NULL "
                "AND has_table_privilege('alembic_version', 'SELECT')"
            )
        )
    else:
        readable = "alembic_version" in inspect(conn).get_table_names()
    if not readable:
        return []
    return [str(row[0]) for row in conn.execute(text("SELECT version_num FROM alembic_version"))]


def behind_revision(conn: Connection) -> tuple[str, str] | None:
    """(the database's revision, the code's last) when the database is at an earlier revision
    this code knows; None at the last one, ahead of it, or unreadable."""
    head, known = _revisions()
    for current in _database_revisions(conn):
        if current != head and current in known:
            return current, head
    return None


def _listed(items: list[str]) -> str:
    """The first `SHOWN` items, and how many more."""
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _cause(exc: OperationalError) -> str:
    lines = str(exc.orig or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _lock_conflict(exc: OperationalError) -> bool:
    """A lock waited on past the lock timeout, or a statement past its timeout (57014)."""
    return getattr(exc.orig, "sqlstate", None) in LOCK_CONFLICTS | {"57014"}


UPGRADE_FIRST = (
    "run `flask --app wsgi db upgrade` as the schema's owner (ALMANAC_MIGRATION_DATABASE_URL) first"
)


def unmigrated(engine: Engine) -> str | None:
    """Why the database is not migrated for this code, in one line; None when it is. A
    database that cannot be answered raises (OperationalError), for the caller to word."""
    absent = missing(engine)
    if len([item for item in absent if item.startswith("table ")]) == len(Base.metadata.tables):
        return f"the database has no Almanac tables yet: {UPGRADE_FIRST}"
    if absent:
        return (
            f"the database is not migrated for this version (it lacks {_listed(absent)}): "
            f"{UPGRADE_FIRST}"
        )
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text(CHECK_LIMITS))
        behind = behind_revision(conn)
    if behind:
        return (
            f"the database is not migrated for this version (it is at revision {behind[0]}, "
            f"this version needs {behind[1]}): {UPGRADE_FIRST}"
        )
    return None


def require_migrated(engine: Engine) -> None:
    """Raise `SchemaBehind` naming what is missing; nothing when migrated or unreachable."""
    try:
        reason = unmigrated(engine)
    except OperationalError as exc:
        if _lock_conflict(exc):
            log.warning(
                "the schema could not be checked at start: a table is locked (%s); starting "
                "anyway (the schema is checked at the next start)",
                _cause(exc),
            )
            return
        # Said once at start, so an operator whose login or password is wrong learns it from
        # the log, not only from /health (the cause's first line; the URL is not logged).
        log.warning(
            "the database could not be reached at start (%s): starting anyway and retrying "
            "until it answers (the schema is checked at the next start)",
            _cause(exc),
        )
        return
    finally:
        # A forking server (gunicorn --preload) must not hand this connection to its workers.
        engine.dispose()
    if reason:
        raise SchemaBehind(reason)


def unfenced_login(engine: Engine) -> str | None:
    """The web's login when row security does not apply to it (a superuser, or a role that
    may bypass it), else None; always None on SQLite."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT rolname, rolsuper OR rolbypassrls FROM pg_roles "
                "WHERE rolname = current_user"
            )
        ).first()
    return str(row[0]) if row is not None and row[1] else None


def missing_app_grants(engine: Engine) -> tuple[str | None, list[str]]:
    """The web's login and what it lacks of the app login's table privileges, reads first
    (PostgreSQL; nothing on SQLite, which has no logins): every request reads accounts and
    tokens, and pages write."""
    if engine.dialect.name != "postgresql":
        return None, []
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        wanted = [
            (table, privilege.strip())
            for table, privileges in APP_GRANTS.items()
            if table in tables
            for privilege in privileges.split(",")
        ]
        login = conn.scalar(text("SELECT current_user"))
        if not wanted:
            return login, []
        pairs = ", ".join(f"(:t{i}, :p{i})" for i in range(len(wanted)))
        params = {f"t{i}": t for i, (t, _) in enumerate(wanted)}
        params |= {f"p{i}": p for i, (_, p) in enumerate(wanted)}
        rows = conn.execute(
            text(
                f"SELECT w.t, w.p FROM (VALUES {pairs}) AS w (t, p) "
                "WHERE NOT has_table_privilege(current_user, w.t, w.p)"
            ),
            params,
        ).all()
        # Inserting takes the next id of the table's sequence.
        inserted = {table for table, privilege in wanted if privilege == "INSERT"}
        sequences = [name for name, table in table_sequences(conn) if table in inserted]
        unusable = conn.scalars(
            text(
                "SELECT s FROM unnest(CAST(:names AS text[])) AS s "
                "WHERE NOT has_sequence_privilege(current_user, s, 'USAGE')"
            ),
            {"names": sequences},
        ).all()
    lacking = sorted(rows, key=lambda row: (row[1] != "SELECT", wanted.index(tuple(row))))
    return login, [f"{privilege} on {table}" for table, privilege in lacking] + [
        f"USAGE on sequence {sequence}" for sequence in unusable
    ]


def require_app_grants(engine: Engine) -> None:
    """Raise `SchemaBehind` when the web's login lacks the app login's privileges: started as
    the scheduler's login, it passed /health and answered every request with a 500."""
    try:
        login, lacking = missing_app_grants(engine)
        unfenced = unfenced_login(engine)
    except OperationalError:
        return
    finally:
        engine.dispose()
    if unfenced is not None:
        log.warning(
            "the web logs in as %s, which row security does not apply to (a superuser, or "
            "BYPASSRLS): a query missing its namespace would reach every tenant; serve the web "
            "as almanac_app (ALMANAC_DATABASE_URL)",
            unfenced,
        )
    if lacking:
        raise SchemaBehind(
            f"the login {login} may not do what the web does (it lacks {_listed(lacking)}): serve "
            "the web as almanac_app (ALMANAC_DATABASE_URL), whose privileges "
            "`flask --app wsgi db upgrade` grants"
        )
