"""The long-running commands (`scheduler run`, `worker`) start only on a migrated database."""

from __future__ import annotations

import click
from flask import Flask

from app.context import database
from app.db.schema_check import SchemaBehind, require_migrated


def migrated(app: Flask) -> None:
    """One line and exit 1 when the database lacks what this code uses (app/db/schema_check.py)."""
    try:
        require_migrated(database(app).engine)
    except SchemaBehind as exc:
        raise click.ClickException(str(exc)) from None
