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
    return ConsoleUser.load(context.session(), user_id)


def init_app(app: Flask) -> None:
    """Register console blueprints, sessions and CSRF protection."""
    from app.console.auth import bp as auth_bp
    from app.console.schedules import bp as schedules_bp

    login_manager.init_app(app)
    csrf.init_app(app)
    app.register_blueprint(auth_bp)
    app.register_blueprint(schedules_bp)
