"""The one place that knows how htmx talks to us: partial requests, `Vary`, and navigation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Response, current_app, flash, make_response, redirect, render_template, request
from werkzeug.wrappers import Response as AnyResponse

V = TypeVar("V", bound=Callable[..., Any])


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


def navigate(target: str) -> AnyResponse:
    """Redirect; an htmx request is told to navigate instead of swapping the page in."""
    if is_partial():
        response = make_response("", 204)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def in_place(partial: str) -> Callable[[V], V]:
    """Mark an action view whose outcome htmx shows in place, rendered with `partial`."""

    def mark(view: V) -> V:
        view.in_place = partial  # type: ignore[attr-defined]
        return view

    return mark


def shown_in_place() -> bool:
    """Whether this request's view (marked `in_place`) shows its outcome where it was asked."""
    view = current_app.view_functions.get(request.endpoint or "")
    return getattr(view, "in_place", None) is not None


def reply(message: str, ok: bool, target: str, link: tuple[str, str] | None = None) -> AnyResponse:
    """Tell how an action went: in place for an htmx swap of an `in_place` view (with `link`, a
    (text, url) to what it made, such as the run it started), else flash the message and
    navigate to `target`."""
    view = current_app.view_functions.get(request.endpoint or "")
    partial = getattr(view, "in_place", None)
    if partial and is_partial():
        return render(partial, partial, message=message, ok=ok, link=link)
    flash(message, "ok" if ok else "error")
    return navigate(target)


# Requests htmx sends by itself while someone types (a form's previews, the backfill count,
# the schedule page's simulation panel). Navigating away or reloading on their behalf threw away
# everything typed on the page.
BACKGROUND_PREVIEWS = frozenset(
    {
        "console_simulation.from_form",
        "console_simulation.stored",
        "console_schedule_forms.live_preview",
        "console_schedule_actions.backfill_count",
    }
)


def is_background_preview() -> bool:
    return is_partial() and request.endpoint in BACKGROUND_PREVIEWS


def paused_preview(signed_in: bool, page: str, fresh_token: str | None = None) -> Response:
    """Answer a background preview in place when its session ended or its token went stale:
    the form stays as typed. Signed in (a stale token), the page gets a fresh token to go on."""
    response = make_response(
        render_template(
            "_paused_preview.html", signed_in=signed_in, page=page, fresh_token=fresh_token
        )
    )
    response.vary.add("HX-Request")
    return response
