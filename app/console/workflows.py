"""Workflows page: versions and activations; deploy from JSON, activate, retire (deployers only).

Deploy errors are the form's content (shown next to the definition, naming the step); refused
activate and retire actions go back to the page with the reason, via app/console/errors.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flask import Blueprint, flash, redirect, request, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ, WORKFLOW_DEPLOY
from app.console import errors
from app.console.common import next_cursor, page_key
from app.console.htmx import render
from app.console.session import NamespaceView, namespace_view
from app.console.typed import not_saved, typed
from app.errors import BadRequest, ValidationFailed
from app.runs import actions, catalog, workflows

bp = Blueprint("console_workflows", __name__)
PAGE = 50
EXAMPLE = {
    "name": "nightly-report",
    "description": "Build and send the nightly report",
    "input_schema": {"type": "object", "properties": {"day": {"type": "string"}}},
    "timeout_seconds": 3600,
    "steps": [
        {"id": "build", "type": "action", "action": "echo", "retry": {"max_attempts": 3}},
        {"id": "cool-down", "type": "wait", "duration": "PT5M"},
        {"id": "approve", "type": "task", "title": "Check the report", "timeout_seconds": 86400},
    ],
}


@bp.record_once
def _load_actions(state: Any) -> None:
    # Deploy checks action names, so the configured action modules must be registered.
    actions.load_modules(state.app.config.get("ACTION_MODULES"))


def back_to(args: dict[str, Any]) -> str:
    """Where a refused activate or retire returns: the workflows page."""
    return url_for("console_workflows.index", ns=args["ns"])


errors.register(bp, back_to=back_to)
# The deploy form's key for what was typed into it (app/console/typed.py).
DEPLOY_FORM = "console_workflows.deploy"


def _page(
    view: NamespaceView,
    definition: str = "",
    error: dict[str, Any] | None = None,
    *,
    activate: bool = True,
    kept: bool = False,
) -> Response:
    """The workflows page; its deploy form holds `definition` and `activate` as given (as
    posted when refused; as typed when `kept` across a sign-in, which the form says)."""
    session = context.session()
    entries, key = catalog.catalog(
        session, view.current, PAGE, page_key(view.current.name, "workflows")
    )
    cursor = next_cursor(view.current.name, "workflows", key)
    return render(
        "workflows/index.html",
        "workflows/index.html",
        422 if error else 200,
        ns=view,
        entries=entries,
        next_url=url_for(".index", ns=view.current.name, cursor=cursor) if cursor else None,
        definition=definition,
        activate=activate,
        kept=kept,
        error=error,
        example=json.dumps(EXAMPLE, indent=2),
        now=context.now(),
    )


@bp.get("/ns/<ns>/workflows")
@login_required
def index(ns: str) -> Response:
    """List workflows with their versions and activations (and, after a deploy posted once
    the session had ended, the definition as it was typed)."""
    view = namespace_view(ns, RUN_READ)
    if not not_saved(DEPLOY_FORM):
        return _page(view)
    activate = bool(typed(DEPLOY_FORM, "activate"))
    return _page(view, typed(DEPLOY_FORM, "definition"), activate=activate, kept=True)


def _refusal(exc: ValidationFailed) -> dict[str, Any]:
    """The inline error: the message, the step it names (if any) and where in the definition."""
    first = exc.errors[0] if exc.errors else {"loc": [], "msg": exc.message}
    return {
        "message": first["msg"],
        "step": exc.details.get("step"),
        "where": _where(first["loc"]),
        # A deploy names every mistake it found: the others, listed under the first.
        "more": [{"where": _where(e["loc"]), "message": e["msg"]} for e in exc.errors[1:]],
    }


def _where(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc) or "definition"


@bp.post("/ns/<ns>/workflows")
@login_required
def deploy(ns: str) -> Response:
    """Deploy the posted definition as the next version (and activate it when asked)."""
    view = namespace_view(ns, WORKFLOW_DEPLOY)
    session, now = context.session(), context.now()
    text = request.form.get("definition", "")
    activate = bool(request.form.get("activate"))

    def refused(error: dict[str, Any]) -> Response:
        """The page again, the form as posted, with `error` under the definition."""
        return _page(view, text, error, activate=activate)

    if not text.strip():
        # The grey example in an empty box can pass for a definition: say the box is empty.
        empty = "Nothing to deploy: type or paste a definition (the example below shows one)."
        return refused({"message": empty, "step": None, "where": "definition"})
    try:
        # Parsed as plain JSON first only for a syntax error's line and column, which the form
        # shows; the read below is the one that counts.
        json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        error = {"message": f"That is not valid JSON: {exc.msg}", "step": None, "where": where}
        return refused(error)
    try:
        # As the API reads a body: no NaN or Infinity, no number too large to store, no NUL,
        # no lone surrogate, no nesting deeper than the limit.
        definition = inputs.loads(text, ["definition"])
    except BadRequest as exc:
        error = {"message": f"That is not valid JSON: {exc.details['reason']}", "step": None}
        return refused(error | {"where": "definition"})
    except ValidationFailed as exc:
        return refused(_refusal(exc))
    try:
        version = workflows.deploy(session, now, view.current, definition)
    except ValidationFailed as exc:
        session.rollback()
        return refused(_refusal(exc))
    name = definition["name"]
    message = f"Deployed {name} version {version.version}"
    if activate:
        workflows.activate(session, now, view.current, name, version.version)
        message += " and activated it"
    session.commit()
    flash(message + ".", "ok")
    return redirect(url_for(".index", ns=ns) + f"#wf-{name}")


@bp.post("/ns/<ns>/workflows/<name>/activate")
@login_required
def activate(ns: str, name: str) -> Response:
    """Activate a version of the workflow (the newest unless the form names one)."""
    view = namespace_view(ns, WORKFLOW_DEPLOY)
    number = workflows.version_number(request.form.get("version"), ["version"])
    session = context.session()
    activation, _, version = workflows.activate(session, context.now(), view.current, name, number)
    session.commit()
    flash(f"Activated {name} version {version.version} ({activation.id}).", "ok")
    return redirect(url_for(".index", ns=ns) + f"#wf-{name}")


@bp.post("/ns/<ns>/activations/<activation_id>/retire")
@login_required
def retire(ns: str, activation_id: str) -> Response:
    """Retire an activation: new runs can no longer start from it."""
    view = namespace_view(ns, WORKFLOW_DEPLOY)
    session = context.session()
    workflows.retire(session, context.now(), view.current, activation_id)
    session.commit()
    flash(f"Retired activation {activation_id}.", "ok")
    return redirect(url_for(".index", ns=ns))
