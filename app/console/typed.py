"""What was typed into a refused form, shown again on the page it returns to.

A refused action (bad JSON in a signal's payload or a skipped step's output) flashes its reason
and sends the browser back with a redirect, which would empty the form. The form's text fields
are kept in the session for that one next page: `typed(form, field)` in a template gives them
back to the form the refusal came from (`form` is its endpoint, with the incident's id for the
skip form of one incident). Kept only when short (the session is a cookie): longer text is lost
as before.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g, request, session

KEY = "typed"
MAX_CHARACTERS = 2000
UNKEPT = frozenset({"csrf_token", "revision", "back", "action"})


def form_key() -> str:
    """The refused form: its endpoint, and the incident it resolves when there is one."""
    incident = (request.view_args or {}).get("incident_id")
    return f"{request.endpoint}:{incident}" if incident else str(request.endpoint)


def keep() -> None:
    """Keep this refused request's text fields for the next page (short ones only)."""
    fields = {k: v for k, v in request.form.items() if k not in UNKEPT}
    if fields and sum(len(v) for v in fields.values()) <= MAX_CHARACTERS:
        session[KEY] = {"form": form_key(), "fields": fields}


def _take() -> None:
    # Shown once: the next page a browser reads takes them out of the session.
    if request.method == "GET" and not request.path.startswith("/api/") and KEY in session:
        g.typed = session.pop(KEY)


def typed(form: str, field: str) -> str:
    kept: dict[str, Any] = g.get("typed") or {}
    if kept.get("form") != form:
        return ""
    return str(kept.get("fields", {}).get(field, ""))


def init_app(app: Flask) -> None:
    app.before_request(_take)
    app.jinja_env.globals["typed"] = typed
