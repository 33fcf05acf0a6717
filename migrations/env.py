"""Alembic environment: the app's metadata, the URL from the caller's config."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, pool

from app.cli.database import MigrationRefused
from app.db import Base, make_engine

config = context.config
target_metadata = Base.metadata


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode copies a SQLite table and drops the original; with foreign keys on,
            # that DROP cascaded into every table referring to it (a downgrade past 0006
            # emptied memberships and API tokens). The switch only takes effect outside a
            # transaction, so it is thrown on the driver's connection before Alembic begins.
            connection.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")
        # Batch mode lets SQLite alter tables by copying them.
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                _refuse_broken_references(connection)
    engine.dispose()


def _refuse_broken_references(connection: Connection) -> None:
    """With foreign keys off, nothing stopped a migration from leaving a row that refers to
    nothing: fail (and so roll back every step) naming the first such table."""
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        table, rowid, parent = broken[0][0], broken[0][1], broken[0][2]
        raise MigrationRefused(
            f"{len(broken)} row(s) would refer to nothing, the first in {table} "
            f"(rowid {rowid}, to {parent}); nothing was changed"
        )


if context.is_offline_mode():
    run_offline()
else:
    run_online()
