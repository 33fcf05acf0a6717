"""`flask --app wsgi ...` commands (README.md): database, users, tokens, namespaces, ticker."""

from __future__ import annotations

from flask import Flask

from app.cli import accounts, database, demo, scheduler, worker
from app.cli.secrets import secrets_group


def init_app(app: Flask) -> None:
    for group in (
        *accounts.GROUPS,
        database.db,
        demo.demo,
        scheduler.scheduler,
        worker.worker,
        secrets_group,
    ):
        app.cli.add_command(group)
