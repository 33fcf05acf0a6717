"""What was typed into a refused form, shown again on the page it returns to.

A refused action (bad JSON in a signal's payload or a skipped step's output, a pause or a
backfill refused on a schedule's page) flashes its reason and sends the browser back with a
redirect, which would empty the form. The form's text fields are kept in the session for that
one next page: `typed(form, field)` in a template gives them back to the form the refusal came
from (`form` is its endpoint, with the incident's id for the skip form of one incident, or the
schedule's id for a schedule's actions). `not_saved(form)`: they were kept across a sign-in
(posted after the session ended), and the page says so. Kept only when short (the session is
a cookie): longer text is lost as before.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g, request, session
from flask_login import current_user

KEY = "typed"
MAX_CHARACTERS = 2000
UNKEPT = frozenset({"csrf_token", "revision", "back", "action", "typed_by"})
# Requests that are not the next page: the sign-in page in between (a draft kept across a
# sign-in waits for the page after it), the page's own assets, and htmx's background requests.
NOT_A_PAGE = frozenset({"console_auth.login", "static", "favicon"})


def form_key() -> str:
    """The refused form: its endpoint, and the incident it resolves, the schedule it acts on or
    the task it completes when there is one."""
    args = request.view_args or {}
    one = args.get("incident_id") or args.get("schedule_id") or args.get("task_id")
    return f"{request.endpoint}:{one}" if one else str(request.endpoint)


def anything() -> bool:
    """Whether this request's form holds text someone typed or chose (not its hidden fields:
    token, revision, who typed it). A trigger, a resume or a delete holds none: there is
    nothing to bring back, only the action to do again."""
    return any(v.strip() for k, v in request.form.items() if k not in UNKEPT)


def keep(*, across_sign_in: bool = False) -> bool:
    """Keep this refused request's text fields for the next page (short ones only); whether
    they were kept. `across_sign_in`: a form posted after its session ended, shown again after
    sign-in, so it keeps the revision it was loaded at (a change made meanwhile by someone else
    is a conflict, not overwritten) and who typed it (only they get it back)."""
    unkept = UNKEPT - {"revision"} if across_sign_in else UNKEPT
    fields = {k: v for k, v in request.form.items() if k not in unkept}
    if not fields or sum(len(v) for v in fields.values()) > MAX_CHARACTERS:
        return False
    session[KEY] = {"form": form_key(), "fields": fields}
    if across_sign_in:
        session[KEY]["by"] = request.form.get("typed_by", "")
    return True


def _take() -> None:
    # Shown once: the next page a browser reads takes them out of the session.
    if (
        request.method == "GET"
        and not request.path.startswith("/api/")
        and request.endpoint not in NOT_A_PAGE
        and request.headers.get("HX-Request") != "true"
        and KEY in session
    ):
        g.typed = session.pop(KEY)


def draft(form: str) -> dict[str, str] | None:
    """Every field kept for `form` (a form key), or None."""
    kept: dict[str, Any] = g.get("typed") or {}
    if kept.get("form") != form:
        return None
    return {str(k): str(v) for k, v in kept.get("fields", {}).items()}


def carried(username: str) -> Any:
    """What is kept for the next page, to carry across a session that is replaced (sign-in):
    only to the user who typed it (another user signing in on the same browser gets nothing)."""
    kept = session.get(KEY)
    if not isinstance(kept, dict) or kept.get("by") != username:
        return None
    return kept


def carry(kept: Any) -> None:
    if kept:
        session[KEY] = kept


def typed(form: str, field: str) -> str:
    kept: dict[str, Any] = g.get("typed") or {}
    if kept.get("form") != form:
        return ""
    return str(kept.get("fields", {}).get(field, ""))


def not_saved(form: str) -> bool:
    """Whether what is kept for `form` was posted after its session ended (kept across the
    sign-in): its page marks it "not saved"."""
    kept: dict[str, Any] = g.get("typed") or {}
    return kept.get("form") == form and "by" in kept


def typed_by() -> str:
    """The signed-in user's name, which a form carries (`csrf()` in macros/widgets.html)."""
    return str(current_user.user.username) if current_user.is_authenticated else ""


def init_app(app: Flask) -> None:
    app.before_request(_take)
    app.jinja_env.globals["typed_by"] = typed_by
    app.jinja_env.globals["typed"] = typed
    app.jinja_env.globals["not_saved"] = not_saved
