"""How the console answers errors, once for every blueprint: an error page, or back with a message.

A refused action (a conflict, a limit, a bad field) rolls back and returns to the page it was sent
from with the reason flashed, or shown in place for an htmx view marked `in_place`. Anything else,
and any refusal before the page's namespace is open (unknown namespace, missing grant), renders the
error page, since there is no page to go back to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    current_app,
    flash,
    g,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user
from flask_wtf.csrf import CSRFError, generate_csrf
from sqlalchemy.exc import OperationalError, ProgrammingError
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from app import context, inputs
from app.calendar import CalendarError, SpecRangeError
from app.console import typed
from app.console.htmx import (
    is_background_preview,
    is_partial,
    paused_preview,
    reply,
    shown_in_place,
)
from app.console.redirects import local_target, page_path
from app.db.session import is_refusal, log_refused
from app.errors import AlmanacError
from app.schedules.errors import RevisionConflict, ScheduleDeleted

log = logging.getLogger(__name__)
Refusal = AlmanacError | CalendarError | SpecRangeError
BackTo = Callable[[dict[str, Any]], str]


def page(status: int, message: str) -> tuple[str, int]:
    """The console's error page."""
    return render_template("error.html", status=status, message=message), status


def _status(exc: Refusal) -> int:
    return exc.http_status if isinstance(exc, AlmanacError) else 422


def _text(exc: Refusal) -> str:
    if isinstance(exc, AlmanacError):
        return exc.message
    if isinstance(exc, CalendarError):
        return exc.located()
    return str(exc)


def _flashed(exc: Refusal) -> str:
    if isinstance(exc, RevisionConflict):
        schedule_id = (request.view_args or {}).get("schedule_id")
        if inputs.ascii_int(request.form.get("revision", "")) is None:
            # Nothing changed: the form itself lacked the revision it was loaded at.
            return (
                f"The form did not say which revision of {schedule_id} it was loaded at, so "
                "nothing was done; the page is reloaded: try again."
            )
        return (
            f"Someone else changed {schedule_id} (now revision "
            f"{exc.details.get('current_revision')}); the page is reloaded, try again."
        )
    return _text(exc)


def http_page(exc: HTTPException) -> Response:
    """Framework refusals (an unknown path, a missing or stale CSRF token, a wrong method) on the
    console's error page, with their status and headers (`Allow` for a 405)."""
    status = exc.code or 500
    if isinstance(exc, CSRFError) and request.method == "POST" and not is_background_preview():
        signed_out = _signed_out_form()
        if signed_out is not None:
            return signed_out
    if isinstance(exc, CSRFError) and is_background_preview() and request.form.get("csrf_token"):
        typed_on = urlsplit(request.headers.get("HX-Current-URL") or request.url).path
        if current_user.is_authenticated:
            return paused_preview(True, typed_on, generate_csrf())
        return paused_preview(False, typed_on)
    if isinstance(exc, CSRFError) and is_partial():
        # An htmx action sent without its token (no form of ours does): swapping an error page
        # in would show nothing; reload the page, with the reason flashed.
        flash(_http_text(exc), "error")
        return _refresh()
    try:
        response = make_response(page(status, _http_text(exc)))
    except OperationalError as down:
        # The page shows who is signed in, read from the database: during an outage the
        # answer is the outage's, not a 500 from inside this handler.
        return make_response(unavailable(down))
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def _refresh() -> Response:
    refresh = make_response("", 204)
    refresh.headers["HX-Refresh"] = "true"
    return refresh


def _signed_out_form() -> Response | None:
    """A form whose token went stale because its browser is no longer signed in (signed out in
    another tab), or is signed in again (a second tab's sign-in page): nothing was written, so
    sign in, or go where the sign-in would have gone. A token from another session cannot be
    told from a stale one of this browser's, and is answered the same way (nothing is written
    either way). None when the token is missing altogether (no form of ours sends none: that is
    a 400). An htmx action (Trigger now, Backfill, Delete) is answered in the same words: it is
    told to navigate to sign-in, or to reload its page, since a 400 would show nothing."""
    if not request.form.get("csrf_token"):
        return None
    if request.endpoint == "console_auth.login_post":
        if current_user.is_authenticated:
            return redirect(local_target(request.form.get("next", "")))
        flash("The sign-in form had expired; please sign in again.", "error")
        return redirect(url_for("console_auth.login", next=request.form.get("next", "")))
    if not current_user.is_authenticated:
        return current_app.login_manager.unauthorized()  # type: ignore[attr-defined,no-any-return]
    # Signed in again elsewhere since the page was loaded: back to the page, which now carries
    # a fresh token, as an htmx action is reloaded (a 400 page's "reload" re-posted the form).
    # Its token may be from before a sign-in elsewhere, from another session, or altered: all
    # that is known is that it did not verify.
    flash(
        "The form could not be verified, so nothing was done; the page is reloaded: try again.",
        "error",
    )
    typed.keep()  # the page comes back with a fresh token, and the form as it was typed
    return _refresh() if is_partial() else redirect(page_path())


def database_refused(exc: ProgrammingError | OperationalError) -> tuple[str, int]:
    """The 503 page when the database refused the statement for what an operator must fix (a
    login without its grants, a schema not migrated): one log line, no traceback. Any other
    refused statement is a bug: 500, with its traceback."""
    if not is_refusal(exc):
        return _unexpected(exc)
    log_refused(log, f"{request.method} {request.path}", exc)
    g._login_user = current_app.login_manager.anonymous_user()  # type: ignore[attr-defined]
    return page(
        503,
        "The database refused this request: the server's database login lacks a grant, or the "
        "database is not migrated. An operator should check the login's grants and run "
        "`flask --app wsgi db upgrade` as the owner.",
    )


def _unexpected(exc: Exception) -> tuple[str, int]:
    log.exception("unhandled error on %s %s", request.method, request.path)
    return page(500, "Internal error")


def unavailable(exc: OperationalError) -> tuple[str, int]:
    """The 503 page while the database is unreachable or busy."""
    if is_refusal(exc):
        # SQLite's "no such table": a file that was never migrated, not an outage.
        return database_refused(exc)
    log.warning("database unavailable on %s %s: %s", request.method, request.path, exc.orig)
    # Who is signed in cannot be read now: render the page as for nobody.
    g._login_user = current_app.login_manager.anonymous_user()  # type: ignore[attr-defined]
    return page(503, "The database is unavailable or busy; try again in a moment.")


def _http_text(exc: HTTPException) -> str:
    if isinstance(exc, CSRFError):
        return (
            f"The form was not accepted: {exc.description} Reload the page (the form may have "
            "been open too long, or the session ended) and try again."
        )
    if exc.code == 404:
        return "There is no such page here; check the address, or start again from the console."
    return str(exc.description or exc.name)


def register(bp: Blueprint, back_to: BackTo | None = None) -> None:
    """Install the handlers on `bp`; `back_to(view_args)` is where its refused actions return."""

    def refused(exc: Refusal) -> Response | tuple[str, int]:
        acting = request.method == "POST" and "namespace_view" in g
        if back_to is None or not acting:
            return page(_status(exc), exc.message if isinstance(exc, AlmanacError) else str(exc))
        context.session().rollback()
        if not is_partial():
            typed.keep()  # the redirect would empty the form: its text comes back once
        back = back_to(request.view_args or {})
        if is_partial() and shown_in_place():
            # Trigger and backfill say it where their result appears, in the words a failed
            # request gets there (static/app.js): "Not done. Error 409: …".
            text = f"Not done. Error {_status(exc)}: {_flashed(exc)}"
            if isinstance(exc, ScheduleDeleted):
                # The page still shows the schedule as it was (badge, next due, buttons).
                return reply(f"{text}. This page is out of date:", False, back, ("Reload it", back))
            return reply(text, False, back)
        return reply(_flashed(exc), False, back)

    for kind in (AlmanacError, CalendarError, SpecRangeError):
        bp.register_error_handler(kind, refused)
    # Registered for `HTTPException` too, else the `Exception` handler below would take them.
    bp.register_error_handler(HTTPException, http_page)
    bp.register_error_handler(OperationalError, unavailable)
    bp.register_error_handler(ProgrammingError, database_refused)
    bp.register_error_handler(Exception, _unexpected)


def init_app(app: Flask) -> None:
    """Paths no blueprint matched get the console's error page; `/api` keeps its JSON (the API
    calls this hook for the other paths)."""
    app.extensions["almanac.error_page"] = http_page
    app.extensions["almanac.refusal_page"] = lambda exc: page(_status(exc), _text(exc))
