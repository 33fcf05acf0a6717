"""The JSON API under `/api/v1`: blueprints, error handling, no CSRF (bearer tokens)."""

from __future__ import annotations

from flask import Flask

from app.api import calendar, errors, incidents, runs, schedules, simulate, system, workflows

PREFIX = "/api/v1"


def init_app(app: Flask) -> None:
    """Register every API blueprint under the prefix, exempt from CSRF; JSON for unmatched paths."""
    csrf = app.extensions["csrf"]
    blueprints = (system.bp, calendar.bp, workflows.bp, runs.bp, incidents.bp, simulate.bp)
    for bp in (*blueprints, schedules.bp):
        csrf.exempt(bp)
        app.register_blueprint(bp, url_prefix=PREFIX)
    errors.init_app(app)
