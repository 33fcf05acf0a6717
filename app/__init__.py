"""Almanac: a durable schedule and timer service. `create_app` is the only entry point."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from flask import Flask

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS: dict[str, Any] = {
    "DATABASE_URL": None,
    # The owner login `db upgrade` and `db create-roles` use (default: DATABASE_URL).
    "MIGRATION_DATABASE_URL": None,
    # The login the ticker uses on PostgreSQL (default: DATABASE_URL), docs/postgres.md.
    "SCHEDULER_DATABASE_URL": None,
    "SECRET_KEY": None,
    "SCHEDULER": "on",
    "TICK_SECONDS": 1.0,
    "TICK_BUDGET_SECONDS": 5.0,
    "MISFIRE_GRACE_SECONDS": 60,
    "ADMIN_USER": "admin",
    "ADMIN_PASSWORD": None,
    "ADMIN_TOKEN": None,
    "ACTION_MODULES": "",
    # Worker threads hosted beside the ticker, their step lease, idle poll and claim batch.
    "WORKERS": 2,
    "LEASE_SECONDS": 60.0,
    "WORKER_POLL_SECONDS": 0.5,
    "WORKER_BATCH": 1,
    "CLOCK": "system",
    # Test-only (refused unless TESTING): skews this process's own clock by this many seconds.
    "CLOCK_OFFSET_SECONDS": 0,
    "TESTING": False,
    # 1 MiB of request body is plenty for any definition, schedule or signal (413 beyond).
    "MAX_CONTENT_LENGTH": 1024 * 1024,
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "REMEMBER_COOKIE_HTTPONLY": True,
    "REMEMBER_COOKIE_SAMESITE": "Lax",
    "PERMANENT_SESSION_LIFETIME": 8 * 3600,
    "WTF_CSRF_TIME_LIMIT": None,
}


def _instance_secret(app: Flask) -> str:
    """A secret key generated once and kept under `instance/`."""
    path = Path(app.instance_path) / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the Flask app: config, database, clock, blueprints, CLI and (optionally) ticker."""
    app = Flask(
        __name__,
        instance_path=str(ROOT / "instance"),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config |= DEFAULTS
    app.config.from_prefixed_env("ALMANAC")
    if test_config:
        app.config |= test_config
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{Path(app.instance_path) / 'almanac.db'}"
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = _instance_secret(app)
    app.config["TESTING"] = str(app.config["TESTING"]).lower() in {"1", "true", "yes", "on"}

    from app import context

    context.init_app(app)

    from app.api import init_app as init_api
    from app.cli import init_app as init_cli
    from app.console import init_app as init_console

    init_console(app)
    init_api(app)
    init_cli(app)

    from app.ticker.host import start_if_enabled

    start_if_enabled(app)
    return app
