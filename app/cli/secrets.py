"""`flask --app wsgi secrets rotate`: re-encrypt secret inputs after adding a key."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app import context
from app.db.rls import Scope
from app.runs.secret_store import rotate_all
from app.runs.secrets import SecretUnavailable

secrets_group = AppGroup("secrets", help="Encrypted secret inputs.")


@secrets_group.command("rotate")
def rotate() -> None:
    """Re-encrypt every stored secret with the first key of ALMANAC_ENCRYPTION_KEYS.

    Put the new key first and keep the old ones after it until this has run.
    """
    # Every namespace's rows: under PostgreSQL's row security an unscoped session sees none, and
    # the rotation reported 0 rows while the old key stayed needed.
    with context.database().bound(Scope.all()).session() as session:
        try:
            count = rotate_all(session)
        except SecretUnavailable as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"re-encrypted secrets in {count} row(s) with the first key")
