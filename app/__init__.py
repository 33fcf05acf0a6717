"""Almanac: a durable schedule and timer service. `create_app` is the only entry point."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from flask import Flask

from app.settings import (
    DEFAULTS,
    ROOT,
    check_settings,
    encryption_keys,
    help_only,
    instance_secret,
    weak_secret_key_warning,
)


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the Flask app: config, database, clock, blueprints, CLI and (optionally) ticker."""
    app = Flask(
        __name__,
        instance_path=str(ROOT / "instance"),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    # Paths are matched as written, before any blueprint adds its rules: a doubled slash
    # (`/api/v1//namespaces`) or a missing trailing one (`/ns/default`) is not redirected, since
    # werkzeug's redirect names the request's Host header (a poisoned cache behind a proxy) and
    # an API client's doubled slash is a bug to show it.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    app.config |= DEFAULTS
    app.config.from_prefixed_env("ALMANAC")
    if test_config:
        app.config |= test_config
    # `flask --app wsgi users --help` only prints: it creates no folder, key or database file.
    if not help_only():
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{Path(app.instance_path) / 'almanac.db'}"
        # Said by no one: `db create-roles` with only the owner's login names no app database.
        app.config["DATABASE_URL_DEFAULTED"] = True
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = instance_secret(app)
    # A setting that cannot be used stops the process here, named, rather than misbehaving.
    check_settings(app.config)
    _log_lines()
    weak_key = weak_secret_key_warning(app.config)
    if weak_key:
        logging.getLogger("app.settings").warning(weak_key)
    sys.setswitchinterval(float(app.config["GIL_SWITCH_INTERVAL"]))

    # Every layer loads here, not when the package is imported: `import app.calendar` (pure
    # code, like the firing policy a simulation runs) loads no database, face or ticker host,
    # in 0.5 s and 32 MB instead of 2.5 s and 96 MB. No module imports from `app` itself.
    from app import api, cli, console, context, headers, heap, inputs, redaction
    from app.auth.first_start import bootstrap_on_start
    from app.db.schema_check import require_app_grants, require_migrated
    from app.runs import secrets as secret_inputs
    from app.ticker.host import serving_process, start_if_enabled

    keys = encryption_keys(app)
    if keys:  # none only when asked for help and no key file exists yet
        secret_inputs.configure(keys)
    context.init_app(app)
    headers.init_app(app)
    redaction.init_app(app)
    console.init_app(app)
    api.init_app(app)
    # No text column of PostgreSQL can hold NUL: refuse it on every face, both databases.
    app.before_request(inputs.refuse_nul_in_request)
    inputs.bound_streamed_bodies(app)
    app.after_request(inputs.drain_unread_body)
    cli.init_app(app)
    if serving_process():
        # Before anything writes: code on a database `db upgrade` has not reached stops here.
        require_migrated(context.database(app).engine)
        require_app_grants(context.database(app).engine)
    bootstrap_on_start(app)
    if serving_process():
        heap.settle()
    start_if_enabled(app)
    return app


def _log_lines() -> None:
    """Timestamped lines with their level on stderr for the app's own loggers (the ticker, the
    workers, phase failures), unless the host process configured logging itself (gunicorn's
    --log-config, a test runner). APScheduler's line per executed tick, alembic's plugin list
    and its setup lines are left out; its line per revision run stays."""
    root = logging.getLogger()
    if root.handlers:
        return
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
    )
    for noisy in ("apscheduler", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.migration").addFilter(_alembic_steps_only)


# What alembic says of its setup at every command ("Context impl PostgresqlImpl.", "Will assume
# transactional DDL."): printed before a refusal too, it read as if something had run.
ALEMBIC_SETUP = ("Context impl", "Will assume")


def _alembic_steps_only(record: logging.LogRecord) -> bool:
    """Keep alembic's "Running upgrade 0013 -> 0014, …" lines, drop its setup lines."""
    return not str(record.msg).startswith(ALEMBIC_SETUP)
