"""Security headers on every response, console and API alike.

The policy allows only this site's own scripts, styles and images, and no framing, so an
injected `<script>` or `style=` does nothing and the console cannot be clickjacked.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'; object-src 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
HSTS = "max-age=31536000; includeSubDomains"


def is_on(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def init_app(app: Flask) -> None:
    """Add the headers after every request; HSTS only when cookies are TLS-only (behind TLS)."""
    secure = is_on(app.config.get("SESSION_COOKIE_SECURE"))
    app.config["SESSION_COOKIE_SECURE"] = secure
    app.config["REMEMBER_COOKIE_SECURE"] = secure

    @app.after_request
    def _headers(response: Response) -> Response:
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        if secure:
            response.headers.setdefault("Strict-Transport-Security", HSTS)
        return response
