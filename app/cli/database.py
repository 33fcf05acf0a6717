"""`db upgrade` / `db downgrade` through Alembic, and `db create-roles` (docs/postgres.md).

Migrations run as the owner: `ALMANAC_MIGRATION_DATABASE_URL` when set, else the app's
`ALMANAC_DATABASE_URL`. Before an upgrade changes anything it checks that login's privileges.
"""

from __future__ import annotations

import sys

import click
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util.exc import CommandError
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.exc import ProgrammingError

from app.cli.failures import database_errors, migration_variable
from app.db import make_engine, normalize_url, schema_check
from app.db.privileges import missing_privileges, unreadable_version
from app.db.roles import create_roles, grant_privileges, grant_tables
from app.settings import ROOT


class MigrationRefused(Exception):
    """A migration found it would break the data; its transaction is rolled back."""


def alembic_config(url: str) -> Config:
    """An Alembic config for `migrations/` pointed at `url`."""
    config = Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def migration_url() -> str:
    """The owner's URL: `MIGRATION_DATABASE_URL`, else the app's."""
    return str(
        current_app.config.get("MIGRATION_DATABASE_URL") or current_app.config["DATABASE_URL"]
    )


def check_upgrade(url: str, target: str = "head") -> list[str]:
    """What the login at `url` lacks to upgrade to `target` (empty when it may go ahead)."""
    script = ScriptDirectory.from_config(alembic_config(url))
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            unreadable = unreadable_version(conn)
            if unreadable:
                return unreadable
            current = MigrationContext.configure(conn).get_current_heads()
            pending = [
                getattr(rev.module, "REQUIRES", {})
                for rev in script.iterate_revisions(target, current or "base")
                if rev is not None
            ]
            # After the revisions, every upgrade grants the logins their tables (even one with
            # nothing pending): only the tables' owner may.
            return missing_privileges(conn, pending, also_own=grant_tables(conn))
    finally:
        engine.dispose()


def upgrade_database(url: str, revision: str = "head") -> list[str]:
    """Check, migrate, then grant the logins what is new; return what the grants did."""
    missing = check_upgrade(url, revision)
    if missing:
        raise PermissionError(missing)
    command.upgrade(alembic_config(url), revision)
    engine = make_engine(url)
    try:
        if engine.dialect.name != "postgresql":
            return []
        with engine.begin() as conn:
            return grant_privileges(conn)
    finally:
        engine.dispose()


db = AppGroup("db", help="Database migrations and logins.")


@db.command("upgrade")
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Upgrade the database to REVISION (default: head), checking privileges first."""
    try:
        with database_errors(migration_variable()):
            done = upgrade_database(migration_url(), revision)
    except (CommandError, RevisionError, MigrationRefused) as exc:
        raise click.ClickException(f"upgrade refused, nothing was changed: {exc}") from None
    except PermissionError as exc:
        click.echo("upgrade refused, nothing was changed; this login lacks:", err=True)
        for item in exc.args[0]:
            click.echo(f"  - {item}", err=True)
        sys.exit(1)
    for line in done:
        click.echo(line)
    if revision == "head":
        # A database whose recorded revision lies (made by a development build whose revision
        # ids meant other steps) is "at head" without the tables: say so, never "upgraded".
        engine = make_engine(migration_url())
        try:
            with database_errors(migration_variable()):
                absent = schema_check.missing(engine)
        finally:
            engine.dispose()
        if absent:
            raise click.ClickException(
                "the database records the newest revision but lacks "
                f"{', '.join(absent[: schema_check.SHOWN])}"
                f"{' and more' if len(absent) > schema_check.SHOWN else ''}: it was made by a "
                "build whose migrations differ from these; restore it from a backup taken "
                "before that build, or migrate a copy by hand"
            )
    click.echo(f"database upgraded to {revision}")


@db.command("downgrade")
@click.argument("revision")
def downgrade(revision: str) -> None:
    """Downgrade the database to REVISION (`base` removes every table)."""
    if not _may_move_revision(migration_url()):
        # Process logins may read the revision (their start checks it), never move it: refused
        # before any revision runs, so nothing is logged as if it had.
        click.echo("downgrade refused: permission denied for table alembic_version", err=True)
        click.echo("  run it as the schema's owner (ALMANAC_MIGRATION_DATABASE_URL)", err=True)
        sys.exit(1)
    try:
        with database_errors(migration_variable(), refusals=False):
            command.downgrade(alembic_config(migration_url()), revision)
    except (CommandError, RevisionError, MigrationRefused) as exc:
        raise click.ClickException(f"downgrade refused, nothing was changed: {exc}") from None
    except ProgrammingError as exc:
        # PostgreSQL runs the revisions in one transaction: a refusal changes nothing.
        click.echo(f"downgrade refused: {str(exc.orig).splitlines()[0]}", err=True)
        click.echo("  run it as the schema's owner (ALMANAC_MIGRATION_DATABASE_URL)", err=True)
        sys.exit(1)
    click.echo(f"database downgraded to {revision}")


def _may_move_revision(url: str) -> bool:
    """Whether the login at `url` may read and update `alembic_version` (always on SQLite)."""
    engine = make_engine(url)
    try:
        with database_errors(migration_variable(), refusals=False), engine.connect() as conn:
            return not unreadable_version(conn)
    finally:
        engine.dispose()


@db.command("create-roles")
def create_roles_command() -> None:
    """Create or update the PostgreSQL logins and grant them their tables (idempotent)."""
    engine = make_engine(migration_url())
    try:
        if engine.dialect.name != "postgresql":
            click.echo("SQLite has no logins: nothing to do")
            return
        with database_errors(migration_variable(), refusals=False), engine.begin() as conn:
            done = create_roles(conn) + grant_privileges(conn)
    except ProgrammingError as exc:
        # Roles are created and granted in one transaction: a refusal changes nothing.
        click.echo("create-roles refused, nothing was changed:", err=True)
        click.echo(f"  {str(exc.orig).splitlines()[0]}", err=True)
        click.echo(
            "  run it as a superuser: only one may pin NOSUPERUSER and NOBYPASSRLS on the logins",
            err=True,
        )
        sys.exit(1)
    finally:
        engine.dispose()
    for line in done:
        click.echo(line)
