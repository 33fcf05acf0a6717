"""The long-running commands (`scheduler run`, `worker`) and `scheduler tick` start only on a
migrated database."""

from __future__ import annotations

import click
from flask import Flask

from app.context import database
from app.db import Database
from app.db.schema_check import SchemaBehind, require_migrated


def migrated(app: Flask, db: Database | None = None) -> None:
    """One line and exit 1 when the database (`db`, else the app's) lacks what this code uses
    (app/db/schema_check.py)."""
    try:
        require_migrated((db or database(app)).engine)
    except SchemaBehind as exc:
        raise click.ClickException(str(exc)) from None
