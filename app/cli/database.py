"""`db upgrade` / `db downgrade` through Alembic, with the app's database URL."""

from __future__ import annotations

import click
from alembic import command
from alembic.config import Config
from flask import current_app
from flask.cli import AppGroup

from app.db import normalize_url
from app.settings import ROOT


def alembic_config(url: str) -> Config:
    """An Alembic config for `migrations/` pointed at `url`."""
    config = Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


db = AppGroup("db", help="Database migrations.")


@db.command("upgrade")
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Upgrade the database to REVISION (default: head)."""
    command.upgrade(alembic_config(current_app.config["DATABASE_URL"]), revision)
    click.echo(f"database upgraded to {revision}")


@db.command("downgrade")
@click.argument("revision")
def downgrade(revision: str) -> None:
    """Downgrade the database to REVISION (`base` removes every table)."""
    command.downgrade(alembic_config(current_app.config["DATABASE_URL"]), revision)
    click.echo(f"database downgraded to {revision}")
