"""`flask --app wsgi ...` commands (SPEC §10): database, users, tokens, namespaces, ticker."""

from __future__ import annotations

from flask import Flask

from app.cli import accounts, database, demo, scheduler, worker


def init_app(app: Flask) -> None:
    for group in (*accounts.GROUPS, database.db, demo.demo, scheduler.scheduler, worker.worker):
        app.cli.add_command(group)
