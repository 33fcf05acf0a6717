"""Sign in, sign out, and the namespace switcher."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user
from werkzeug.wrappers import Response

from app import context
from app.auth import service as auth_service
from app.console import errors
from app.console.session import ConsoleUser

bp = Blueprint("console_auth", __name__)
errors.register(bp)


@bp.get("/login")
def login() -> str:
    """Show the sign-in form."""
    return render_template("login.html", next=request.args.get("next", ""))


@bp.post("/login")
def login_post() -> Response | tuple[str, int]:
    """Sign in with a username and password; failures never say which part was wrong."""
    username = request.form.get("username", "")[:64]
    password = request.form.get("password", "")[:1024]
    user = auth_service.authenticate_password(context.session(), username, password)
    if user is None:
        flash("Wrong username or password.", "error")
        return render_template("login.html", next=request.form.get("next", "")), 401
    session.clear()
    session.permanent = True
    login_user(ConsoleUser(user))
    target = request.form.get("next", "")
    # Only local paths: never redirect to another site after sign-in.
    if not target.startswith("/") or target.startswith("//"):
        target = url_for("console_auth.home")
    return redirect(target)


@bp.post("/logout")
@login_required
def logout() -> Response:
    """Sign out."""
    logout_user()
    session.clear()
    return redirect(url_for("console_auth.login"))


@bp.get("/")
@login_required
def home() -> Response:
    """Go to the overview of the first namespace the user belongs to."""
    choices = auth_service.visible_namespaces(context.session(), current_user.user)
    if not choices:
        return redirect(url_for("console_auth.no_namespace"))
    return redirect(url_for("console_overview.index", ns=choices[0].name))


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
