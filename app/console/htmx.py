"""The one place that knows how htmx talks to us: partial requests and `Vary`."""

from __future__ import annotations

from typing import Any

from flask import Response, make_response, render_template, request


def is_partial() -> bool:
    """True for an htmx swap (HX-Request) that is not a boosted full navigation."""
    return (
        request.headers.get("HX-Request") == "true" and request.headers.get("HX-Boosted") != "true"
    )


def render(page: str, partial: str, /, http_status: int = 200, **ctx: Any) -> Response:
    """Render the partial alone for htmx, else the full page that includes it."""
    response = make_response(render_template(partial if is_partial() else page, **ctx), http_status)
    response.vary.add("HX-Request")
    return response
