"""The operator console (SPEC §8): server-rendered pages, htmx partials, sessions and CSRF."""

from __future__ import annotations

from flask import Flask
from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

from app import context
from app.console.session import ConsoleUser

login_manager = LoginManager()
login_manager.login_view = "console_auth.login"
login_manager.login_message = "Please sign in."
login_manager.session_protection = "strong"
csrf = CSRFProtect()


@login_manager.user_loader
def _load_user(user_id: str) -> ConsoleUser | None:
    user = ConsoleUser.load(context.session(), user_id)
    if user is not None:
        context.act_as(user.user.id)
    return user


def init_app(app: Flask) -> None:
    """Register console blueprints, sessions and CSRF protection."""
    from app.console import auth, filters, load, runs, schedule_actions, schedule_forms, schedules

    filters.register(app)
    login_manager.init_app(app)
    csrf.init_app(app)
    for module in (auth, schedules, schedule_forms, schedule_actions, runs, load):
        app.register_blueprint(module.bp)
