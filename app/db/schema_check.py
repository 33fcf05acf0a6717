"""Is the database migrated for this code? A process that serves, ticks or works checks at start.

Code started on a database that `db upgrade` has not brought to this version answered every
request "busy, retry" while `/health` said ok, and its ticker wrote into the old tables. Such a
process now stops at start with one line naming what is missing and the command that fixes it.

The check compares the tables and columns of the models with the database's catalog (which
every login may read, whatever its privileges); a database that is ahead of the code (a newer
table or column) passes. A database that cannot be reached is not checked: the process starts
and waits for it, as it does for any outage.
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect
from sqlalchemy.exc import OperationalError

from app.db import Base
from app.settings import SettingError

# How many missing tables or columns the message names before "and N more".
SHOWN = 4


class SchemaBehind(SettingError):
    """The database lacks tables or columns this code uses."""


def missing(engine: Engine) -> list[str]:
    """The tables and columns of the models that the database does not have."""
    catalog = inspect(engine)
    tables = set(catalog.get_table_names())
    absent: list[str] = []
    for name, table in Base.metadata.tables.items():
        if name not in tables:
            absent.append(f"table {name}")
            continue
        have = {column["name"] for column in catalog.get_columns(name)}
        absent.extend(f"column {name}.{c.name}" for c in table.columns if c.name not in have)
    return absent


def require_migrated(engine: Engine) -> None:
    """Raise `SchemaBehind` naming what is missing; nothing when migrated or unreachable."""
    try:
        absent = missing(engine)
    except OperationalError:
        return
    finally:
        # A forking server (gunicorn --preload) must not hand this connection to its workers.
        engine.dispose()
    if absent:
        shown = ", ".join(absent[:SHOWN])
        more = f" and {len(absent) - SHOWN} more" if len(absent) > SHOWN else ""
        raise SchemaBehind(
            f"the database is not migrated for this version (it lacks {shown}{more}): run "
            "`flask --app wsgi db upgrade` as the schema's owner (ALMANAC_MIGRATION_DATABASE_URL) "
            "first"
        )
