"""The JSON API under `/api/v1`: blueprints, error handling, no CSRF (bearer tokens)."""

from __future__ import annotations

from typing import Any

from flask import Flask, Request
from flask.sessions import SecureCookieSessionInterface

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
    app.session_interface = _NoCookiesForTheApi()


class _NoCookiesForTheApi(SecureCookieSessionInterface):
    """The console's signed-cookie session, not opened for API requests: the API knows its
    callers by bearer token only, so a cookie sent along is neither read nor answered."""

    def open_session(self, app: Flask, request: Request) -> Any:
        if errors.is_api_path(request.path):
            return self.make_null_session(app)
        return super().open_session(app, request)
