"""`flask --app wsgi secrets rotate`: re-encrypt secret inputs after adding a key."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app import context
from app.cli.failures import APP_VARIABLE, database_errors, refuse_unmigrated
from app.db.rls import Scope
from app.runs.secret_store import rotate_all
from app.runs.secrets import LOST_KEY

secrets_group = AppGroup("secrets", help="Encrypted secret inputs.")


@secrets_group.command("rotate")
def rotate() -> None:
    """Re-encrypt every stored secret with the first key of ALMANAC_ENCRYPTION_KEYS.

    Put the new key first and keep the old ones after it until this has run.
    """
    # Every namespace's rows: under PostgreSQL's row security an unscoped session sees none, and
    # the rotation reported 0 rows while the old key stayed needed.
    unopened: list[str] = []
    refuse_unmigrated(context.database().engine, APP_VARIABLE)
    with (
        database_errors(APP_VARIABLE, tables=True),
        context.database().bound(Scope.all()).session() as session,
    ):
        count = rotate_all(session, unopened)
    click.echo(f"re-encrypted secrets in {count} row(s) with the first key")
    if unopened:
        # Everything that could be opened was rotated; these could not, and say what to do.
        # Nothing rotated at all usually means the old key was dropped before this ran.
        raise click.ClickException(
            f"{len(unopened)} stored secret value(s) were left as they are, still sealed with an "
            f"older key: {LOST_KEY}; if that key is lost, those values are lost too (send them "
            "again where they are still used)"
        )
