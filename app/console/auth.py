"""Sign in, sign out, and the namespace switcher."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user
from werkzeug.wrappers import Response

from app import context
from app.auth import service as auth_service
from app.auth import sessions as console_sessions
from app.auth import throttle
from app.console import errors, typed
from app.console.redirects import local_target
from app.console.session import ConsoleUser, landing_namespace
from app.db.session import begin_write

bp = Blueprint("console_auth", __name__)
errors.register(bp)


@bp.get("/login")
def login() -> str:
    """Show the sign-in form."""
    return render_template("login.html", next=local_target(request.args.get("next", "")))


@bp.post("/login")
def login_post() -> Response | tuple[str, int, dict[str, str]] | tuple[str, int]:
    """Sign in with a username and password; failures never say which part was wrong.

    Throttled per username and per client address: the attempt is counted (committed) before
    the password hash is computed, and a success clears the username's count.
    """
    username = request.form.get("username", "")[:64]
    password = request.form.get("password", "")[:1024]
    target = local_target(request.form.get("next", ""))
    db, now = context.session(), context.now()
    address = (request.remote_addr or "unknown")[:64]
    try:
        throttle.admit(db, now, username, address)
    except throttle.TooManyAttempts as exc:
        flash("Too many failed sign-ins. Wait a few minutes, then try again.", "error")
        page = render_template("login.html", next=target, username=username)
        return page, 429, {"Retry-After": str(exc.retry_after)}
    user = auth_service.authenticate_password(db, username, password)
    if user is None:
        # The attempt was counted as a failure when it was admitted: nothing more to write.
        flash("Wrong username or password.", "error")
        # The username stays typed (never the password): a typo in the password is the usual case.
        return render_template("login.html", next=target, username=username), 401
    begin_write(db)
    throttle.clear(db, username)
    if current_user.is_authenticated:
        # Signing in again from a signed-in browser replaces its session: the old id ends.
        console_sessions.end(db, now, current_user.token)
    token = console_sessions.start(db, now, user)
    db.commit()
    # A fresh cookie as well as a fresh server-side session: nothing from before survives,
    # but what a form refused for its ended session kept (typed.py) is shown on the next page.
    kept = typed.carried(user.username)
    session.clear()
    typed.carry(kept)
    login_user(ConsoleUser(user, token))
    return redirect(target)


@bp.post("/logout")
@login_required
def logout() -> Response:
    """Sign out: the server-side session ends, so a copy of the cookie is useless too."""
    db = context.session()
    begin_write(db)
    console_sessions.end(db, context.now(), current_user.token)
    db.commit()
    logout_user()
    session.clear()
    return redirect(url_for("console_auth.login"))


@bp.get("/")
@login_required
def home() -> Response:
    """Go to the overview of the namespace used last, else `default`, else the first one."""
    choices = auth_service.visible_namespaces(context.session(), current_user.user)
    landing = landing_namespace(current_user.user, choices)
    if landing is None:
        return redirect(url_for("console_auth.no_namespace"))
    return redirect(url_for("console_overview.index", ns=landing.name))


@bp.get("/welcome")
@login_required
def no_namespace() -> str:
    """Explain that the user belongs to no namespace yet."""
    return render_template("no_namespace.html")


@bp.get("/switch")
@login_required
def switch() -> Response:
    """Switch to another namespace (the switcher's form submits here)."""
    name = request.args.get("ns", "")
    names = {n.name for n in auth_service.visible_namespaces(context.session(), current_user.user)}
    if name not in names:
        abort(404)
    return redirect(url_for("console_overview.index", ns=name))
