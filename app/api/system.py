"""Health, OpenAPI, namespaces and the superuser's clock and tick controls."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app import context
from app.api import errors
from app.api.models import ClockIn, NamespaceIn, TickIn
from app.api.openapi import build_document
from app.api.routing import PAGE, current_user, operation, page_args, page_json, parse_body
from app.auth import service as auth_service
from app.calendar import CalendarError, format_utc, parse_instant
from app.db import Namespace
from app.db.session import begin_write
from app.errors import Conflict, InvalidCursor, ValidationFailed
from app.ticker import health as ticker_health
from app.ticker.tick import run_tick

bp = Blueprint("api_system", __name__)
errors.register(bp)

# The list of namespaces belongs to none: its cursors are bound to this instead of a name (no
# namespace is named with an empty name).
NO_NAMESPACE = ""


def namespace_json(namespace: Namespace) -> dict[str, Any]:
    return {
        "name": namespace.name,
        "max_active_runs": namespace.max_active_runs,
        "created_at": format_utc(namespace.created_at),
    }


@operation(bp, "GET", "/health", summary="Database reachability and ticker liveness", auth=False)
def health() -> Any:
    """Report whether the database answers and when the ticker last ticked."""
    report = ticker_health.health(context.database(), context.clock(), current_app.config)
    return jsonify(report), (200 if report["database"] == "ok" else 503)


@operation(bp, "GET", "/openapi.json", summary="This document", auth=False)
def openapi() -> Any:
    """Serve the OpenAPI document of every route."""
    return jsonify(build_document())


@operation(bp, "GET", "/namespaces", summary="Namespaces the caller belongs to", query=PAGE)
def list_namespaces() -> Any:
    """List the namespaces visible to the caller, by name, a page at a time."""
    limit, key = page_args(NO_NAMESPACE, "namespaces")
    if key is not None and (len(key) != 1 or not isinstance(key[0], str)):
        raise InvalidCursor("the cursor is not valid for this list")
    rows = auth_service.visible_namespaces(
        context.session(), current_user(), after=key[0] if key else None, limit=limit + 1
    )
    items = [namespace_json(n) for n in rows[:limit]]
    next_key = [rows[limit - 1].name] if len(rows) > limit else None
    return jsonify(page_json(NO_NAMESPACE, "namespaces", items, next_key))


@operation(bp, "GET", "/me", summary="The caller: username, superuser, namespaces with roles")
def me() -> Any:
    """Who the bearer token belongs to, as `almanac auth status` shows it."""
    session, user = context.session(), current_user()
    namespaces = [
        # A superuser holds every grant everywhere, so a namespace without a membership reads admin.
        {"name": n.name, "role": auth_service.role_in(session, user, n) or "admin"}
        for n in auth_service.visible_namespaces(session, user)
    ]
    return jsonify(
        {"username": user.username, "superuser": user.is_superuser, "namespaces": namespaces}
    )


@operation(
    bp,
    "POST",
    "/namespaces",
    summary="Create a namespace",
    superuser=True,
    body=NamespaceIn,
    status=201,
)
def create_namespace() -> Any:
    """Create a namespace (superuser only)."""
    body = parse_body(NamespaceIn)
    session = context.session()
    begin_write(session)
    namespace = auth_service.create_namespace(
        session, context.now(), body.name, body.max_active_runs
    )
    session.commit()
    return jsonify(namespace_json(namespace)), 201


@operation(
    bp, "POST", "/admin/clock", summary="Move the manual clock", superuser=True, body=ClockIn
)
def set_clock() -> Any:
    """Move the manual clock and optionally run one tick at the new time."""
    body = parse_body(ClockIn)
    clock = context.clock()
    if not clock.manual:
        raise Conflict("the clock is not manual; start with ALMANAC_CLOCK=manual")
    try:
        instant = parse_instant(body.now, ("now",))
    except CalendarError as exc:
        # A malformed instant is a bad field like any other, not a calendar's error.
        raise ValidationFailed([{"loc": ["now"], "msg": exc.msg}]) from None
    session = context.session()
    begin_write(session)
    clock.set(session, instant)  # type: ignore[union-attr]
    session.commit()
    result: dict[str, Any] = {"now": format_utc(instant)}
    if body.tick:
        result = run_tick(current_app, work=body.work).to_json()
    return jsonify(result)


@operation(bp, "POST", "/admin/tick", summary="Run one tick now", superuser=True, body=TickIn)
def tick_now() -> Any:
    """Run one tick synchronously and return its rows."""
    body = parse_body(TickIn)
    return jsonify(run_tick(current_app, work=body.work).to_json())
