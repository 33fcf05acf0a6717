"""Schedules pages (the list grows with the schedules issue)."""

from __future__ import annotations

from flask import Blueprint
from flask_login import login_required
from werkzeug.wrappers import Response

from app.auth.grants import RUN_READ
from app.console.htmx import render
from app.console.session import namespace_view

bp = Blueprint("console_schedules", __name__)


@bp.get("/ns/<ns>/schedules")
@login_required
def index(ns: str) -> Response:
    """List the namespace's schedules."""
    view = namespace_view(ns, RUN_READ)
    return render("schedules/index.html", "schedules/_rows.html", ns=view, schedules=[])
