"""Almanac: a durable schedule and timer service. `create_app` is the only entry point."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

from flask import Flask

from app.db.files import read_or_create_secret

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS: dict[str, Any] = {
    "DATABASE_URL": None,
    "SECRET_KEY": None,
    # Comma-separated Fernet keys for secret inputs: the first encrypts, all decrypt.
    "ENCRYPTION_KEYS": None,
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
    "TESTING": False,
    # 1 MiB of request body is plenty for any definition, schedule or signal (413 beyond).
    "MAX_CONTENT_LENGTH": 1024 * 1024,
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "REMEMBER_COOKIE_HTTPONLY": True,
    "REMEMBER_COOKIE_SAMESITE": "Lax",
    "PERMANENT_SESSION_LIFETIME": 8 * 3600,
    "WTF_CSRF_TIME_LIMIT": None,
    # Seconds a thread may hold the GIL before another may take it (Python's default is 5 ms).
    # The web process serves many threads; a short interval keeps cheap requests (health,
    # pages) prompt while a CPU-heavy one runs.
    "GIL_SWITCH_INTERVAL": 0.001,
}


def _instance_secret(app: Flask) -> str:
    """A secret key generated once and kept under `instance/` (created 0600)."""
    return read_or_create_secret(Path(app.instance_path) / "secret_key", secrets.token_hex(32))


def _encryption_keys(app: Flask) -> str:
    """`ALMANAC_ENCRYPTION_KEYS`, else one Fernet key generated once under `instance/` (0600)."""
    from app.runs.secrets import new_key

    configured = app.config.get("ENCRYPTION_KEYS")
    if configured:
        return str(configured)
    return read_or_create_secret(Path(app.instance_path) / "encryption_key", new_key())


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
    sys.setswitchinterval(float(app.config["GIL_SWITCH_INTERVAL"]))

    from app import context, headers, redaction
    from app.runs import secrets as secret_inputs

    secret_inputs.configure(_encryption_keys(app).split(","))
    context.init_app(app)
    headers.init_app(app)
    redaction.init_app(app)

    from app.api import init_app as init_api
    from app.cli import init_app as init_cli
    from app.console import init_app as init_console

    init_console(app)
    init_api(app)
    init_cli(app)

    from app.ticker.host import start_if_enabled

    start_if_enabled(app)
    return app
