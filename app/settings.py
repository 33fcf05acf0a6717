"""The app's defaults, where its folders live, and the secret key generated on first start."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from flask import Flask

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS: dict[str, Any] = {
    "DATABASE_URL": None,
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


def instance_secret(app: Flask) -> str:
    """A secret key generated once and kept under `instance/`."""
    path = Path(app.instance_path) / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()
