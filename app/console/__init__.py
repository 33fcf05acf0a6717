"""The operator console: server-rendered pages, htmx partials, sessions and CSRF."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, current_app, flash, redirect, request, send_from_directory
from flask_login import LoginManager, login_url
from flask_wtf.csrf import CSRFProtect
from werkzeug.wrappers import Response

from app import context
from app.console import (
    auth,
    errors,
    filters,
    htmx,
    incidents,
    load,
    overview,
    preferences,
    runs,
    schedule_actions,
    schedule_forms,
    schedules,
    simulation,
    steps_html,
    typed,
    workflows,
)
from app.console.redirects import page_path
from app.console.session import ConsoleUser

login_manager = LoginManager()
login_manager.login_view = "console_auth.login"
login_manager.login_message = "Please sign in."
login_manager.session_protection = "strong"
csrf = CSRFProtect()
SIGN_OUT = frozenset({"console_auth.logout", "console_auth.login_post"})
NOT_SAVED_KEPT = (
    "Your session had ended, so what you submitted was NOT saved. Sign in: the form comes back "
    "as you typed it, to check and submit again."
)
NOT_SAVED = (
    "Your session had ended, so what you submitted was NOT saved (it was too long to keep "
    "here). Sign in and enter it again."
)
NOT_DONE = "Your session had ended, so that was NOT done. Sign in and try again."


@login_manager.unauthorized_handler
def _sign_in_first() -> Response:
    """Send the browser to sign in, back to the page it was on afterwards.

    An htmx swap (a live refresh once the session ended, by sign-out elsewhere, revocation or
    timeout) is told to navigate: a redirect would be followed and the login page swapped into
    the table or card being refreshed.
    """
    if htmx.is_background_preview():
        # Nobody asked to leave the form: say so in place, keep what was typed.
        page = request.headers.get("HX-Current-URL") or request.url
        return htmx.paused_preview(False, urlsplit(page).path)
    if request.method == "POST" and request.endpoint not in SIGN_OUT:
        # A form posted after its session ended (signed out in another tab), plainly or by
        # htmx (Trigger now): nothing was written. Say so on the sign-in page, and bring what
        # was typed back after it.
        flash(_not_done(), "error")
    else:
        flash(login_manager.login_message, login_manager.login_message_category)
    if htmx.is_partial():
        page = request.headers.get("HX-Current-URL") or request.url
        return htmx.navigate(login_url(login_manager.login_view, page))
    return redirect(login_url(login_manager.login_view, page_path()))


def _not_done() -> str:
    if not typed.anything():
        return NOT_DONE
    return NOT_SAVED_KEPT if typed.keep(across_sign_in=True) else NOT_SAVED


@login_manager.user_loader
def _load_user(user_id: str) -> ConsoleUser | None:
    user = ConsoleUser.load(context.session(), context.now(), user_id)
    if user is not None:
        context.act_as(user.user.id)
    return user


def init_app(app: Flask) -> None:
    """Register console blueprints, sessions and CSRF protection."""
    filters.register(app)
    steps_html.register(app)
    typed.init_app(app)
    errors.init_app(app)
    login_manager.init_app(app)
    csrf.init_app(app)
    for module in (
        auth,
        overview,
        schedules,
        schedule_forms,
        schedule_actions,
        simulation,
        runs,
        incidents,
        load,
        workflows,
        preferences,
    ):
        app.register_blueprint(module.bp)
    app.add_url_rule("/favicon.ico", "favicon", favicon)
    app.after_request(no_store)


def no_store(response: Response) -> Response:
    """Keep console answers out of every cache: they show what only a signed-in user may read,
    and Back after signing out must not show them again. Static assets stay cacheable; the API
    decides for itself. Every console answer gets it, signed in or not (the sign-in page too):
    telling who is signed in here could need the database, during an outage too."""
    if request.endpoint in {"static", "favicon"} or request.path.startswith("/api/"):
        return response
    response.headers["Cache-Control"] = "no-store"
    return response


def favicon() -> Response:
    """Browsers ask for /favicon.ico on every site: answer with the vendored icon, not a 404."""
    folder = current_app.static_folder or "static"
    return send_from_directory(folder, "favicon.svg", mimetype="image/svg+xml", max_age=86400)
