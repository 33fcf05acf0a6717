"""The reader's display preferences: absolute times in UTC or in each schedule's time zone."""

from __future__ import annotations

from flask import Blueprint, redirect, request
from flask_login import login_required
from werkzeug.wrappers import Response

from app.console import errors
from app.console.redirects import local_target
from app.console.timefmt import SHOW_UTC, SHOW_ZONE, TIME_COOKIE

bp = Blueprint("console_preferences", __name__)
errors.register(bp)
ONE_YEAR = 365 * 86400


@bp.post("/preferences/times")
@login_required
def times() -> Response:
    """Remember how absolute times are shown, and go back to the page the switch was on."""
    show = request.form.get("show")
    response = redirect(local_target(request.form.get("next", "")))
    if show in (SHOW_UTC, SHOW_ZONE):
        response.set_cookie(
            TIME_COOKIE,
            show,
            max_age=ONE_YEAR,
            httponly=True,
            samesite="Lax",
            secure=request.is_secure,
        )
    return response
