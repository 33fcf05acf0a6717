"""Security headers on every response; HSTS behind TLS (finding 5)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import make_test_app

CSP = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'; object-src 'none'"
)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def _check(response) -> None:
    assert response.headers["Content-Security-Policy"] == CSP
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_every_kind_of_response_carries_the_headers(client, admin_api):
    responses = [
        client.get("/login"),
        client.get("/"),
        client.get("/no-such-page"),
        client.get("/static/app.css"),
        client.get("/api/v1/health"),
        client.get("/api/v1/openapi.json"),
        client.get("/api/v1/schedules"),
        admin_api.get("/schedules"),
        admin_api.get("/schedules/missing"),
    ]
    for response in responses:
        _check(response)
        assert "Strict-Transport-Security" not in response.headers


def test_hsts_only_with_secure_cookies(db_url):
    app = make_test_app(db_url, SESSION_COOKIE_SECURE="1")
    response = app.test_client().get("/login")
    _check(response)
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")
    app.extensions["almanac.db"].dispose()


def test_templates_have_no_inline_script_or_style():
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), path
        assert not re.search(r"\sstyle=", text), path
        assert "<style" not in text, path
        assert not re.search(r"\son[a-z]+=", text), path
        assert "javascript:" not in text, path
    base = (TEMPLATES / "base.html").read_text()
    assert '"includeIndicatorStyles": false' in base
