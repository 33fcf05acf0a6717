"""Schedule routes (docs/api.md): save, read, list, patch, pause/resume, delete, trigger,
backfill, the occurrence ledger and the audit stream."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, jsonify, request

from app import context
from app.api import errors
from app.api.routing import (
    FLAG,
    IF_MATCH_TEXT,
    command,
    current_user,
    one_of,
    operation,
    page_args,
    page_json,
    parse_body,
    query_flag,
    query_int,
    repeatable,
)
from app.api.schedule_models import (
    BackfillIn,
    ReasonIn,
    ScheduleIn,
    SchedulePatchIn,
    TriggerIn,
)
from app.auth.grants import RUN_READ, RUN_START, TRIGGER_MANAGE
from app.calendar import CalendarError, parse_instant
from app.db import Namespace, Schedule
from app.db.schedules import SCHEDULE_STATUSES
from app.errors import BadRequest, InvalidCursor
from app.schedules import manual, queries, service, store
from app.schedules.config import label_pair
from app.schedules.errors import invalid

bp = Blueprint("api_schedules", __name__)
errors.register(bp)

ONE = "/schedules/<schedule_id>"
CHANGE = (TRIGGER_MANAGE,)
START = (TRIGGER_MANAGE, RUN_START)
# 3, "3" or W/"3": a weak tag is always quoted, and quotes come in pairs.
IF_MATCH = re.compile(IF_MATCH_TEXT)
# Clients may declare themselves (informational); anything else is recorded as plain `api`.
DECLARED_SOURCES = frozenset({"cli", "sdk"})


def _if_match() -> int | None:
    """The revision in `If-Match` (quoted or not), or None when absent."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    match = IF_MATCH.fullmatch(raw)
    if match is None:
        raise BadRequest('If-Match must be a schedule revision, like "3"')
    return int(match.group(1) or match.group(2))


def _one(
    namespace: Namespace, schedule: Schedule, status_code: int = 200, upcoming: int | None = None
) -> Response:
    """Render one schedule with its ETag, then commit the request's work.

    Read in the transaction that made the change, so PostgreSQL binds no second one.
    """
    session = context.session()
    user = current_user()
    body = queries.resources(session, namespace, [schedule], upcoming, {user.id: user.username})[0]
    session.commit()
    return _rendered(body, schedule, status_code)


def _rendered(body: dict[str, Any], schedule: Schedule, status_code: int) -> Response:
    response = jsonify(body)
    response.status_code = status_code
    response.headers["ETag"] = f'"{schedule.revision}"'
    return response


@operation(
    bp,
    "GET",
    "/schedules",
    summary="List schedules, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[
        ("status", "active|paused|blocked|deleted", one_of(SCHEDULE_STATUSES)),
        repeatable("label", "k:v (repeatable; all must match)"),
        ("q", "text in id, notes or workflow"),
        ("include_deleted", "true to list deleted ones too", FLAG),
        ("limit", "1-100"),
        ("cursor", "next_cursor of a page"),
    ],
)
def list_schedules(namespace: Namespace) -> Any:
    """List the namespace's schedules with filters and a keyset cursor."""
    limit, key = page_args(namespace.name, "schedules")
    after = _int_key(key)
    filters = queries.ScheduleFilter(
        status=request.args.get("status") or None,
        labels=_labels(),
        text=(request.args.get("q") or None),
        include_deleted=query_flag("include_deleted"),
    )
    session = context.session()
    rows, next_key = queries.list_schedules(session, namespace, filters, limit, after)
    items = queries.resources(session, namespace, rows)
    return jsonify(page_json(namespace.name, "schedules", items, [next_key] if next_key else None))


@operation(
    bp,
    "POST",
    "/schedules",
    summary="Save a schedule (create, or replace with If-Match)",
    grant=START,
    body=ScheduleIn,
    status=201,
    also=(200,),
    namespaced=True,
    if_match=True,
)
def save_schedule(namespace: Namespace) -> Any:
    """Create a schedule (201), or replace one whose revision is in If-Match (200)."""
    body = parse_body(ScheduleIn).model_dump(exclude_unset=True)
    session, user = context.session(), current_user()
    schedule, created = service.save(
        session, context.now(), namespace, user, command(), body, _if_match()
    )
    if not created:
        return _one(namespace, schedule)
    session.commit()
    return _rendered(queries.created_resource(namespace, schedule, user.username), schedule, 201)


@operation(
    bp,
    "GET",
    ONE,
    summary="Read a schedule",
    grant=RUN_READ,
    namespaced=True,
    query=[("upcoming", "how many upcoming due times (0-100, default 5)")],
)
def read_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Read one schedule (deleted ones too) with its upcoming due times and ETag."""
    upcoming = query_int("upcoming", 5, 0, 100)
    schedule = store.get(context.session(), namespace, schedule_id)
    return _one(namespace, schedule, upcoming=upcoming)


@operation(
    bp,
    "PATCH",
    ONE,
    summary="Update part of a schedule (merge patch, If-Match)",
    grant=CHANGE,
    body=SchedulePatchIn,
    namespaced=True,
    if_match=True,
)
def patch_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Merge the body into the schedule's configuration as a new revision."""
    body = parse_body(SchedulePatchIn).model_dump(exclude_unset=True)
    schedule = service.patch(
        context.session(),
        context.now(),
        namespace,
        current_user(),
        command(),
        schedule_id,
        body,
        _if_match(),
    )
    return _one(namespace, schedule)


def _pause(namespace: Namespace, schedule_id: str) -> Response:
    reason = parse_body(ReasonIn).reason
    schedule = service.pause(
        context.session(),
        context.now(),
        namespace,
        current_user(),
        command(reason),
        schedule_id,
        _if_match(),
        reason,
    )
    return _one(namespace, schedule)


def _resume(namespace: Namespace, schedule_id: str) -> Response:
    return _change(namespace, schedule_id, service.resume)


def _delete(namespace: Namespace, schedule_id: str) -> Response:
    return _change(namespace, schedule_id, service.delete)


def _change(namespace: Namespace, schedule_id: str, change: Callable[..., Schedule]) -> Response:
    """Resume or delete: the same arguments, the schedule as it is afterwards."""
    reason = parse_body(ReasonIn).reason
    schedule = change(
        context.session(),
        context.now(),
        namespace,
        current_user(),
        command(reason),
        schedule_id,
        _if_match(),
    )
    return _one(namespace, schedule)


@operation(
    bp,
    "POST",
    f"{ONE}/pause",
    summary="Pause a schedule (If-Match)",
    grant=CHANGE,
    body=ReasonIn,
    namespaced=True,
    if_match=True,
)
def pause_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Stop a schedule firing until it is resumed."""
    return _pause(namespace, schedule_id)


@operation(
    bp,
    "POST",
    f"{ONE}/disable",
    summary="Pause a schedule (alias, If-Match)",
    grant=CHANGE,
    body=ReasonIn,
    namespaced=True,
    if_match=True,
)
def disable_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Stop a schedule firing until it is enabled."""
    return _pause(namespace, schedule_id)


@operation(
    bp,
    "POST",
    f"{ONE}/resume",
    summary="Resume a schedule (If-Match)",
    grant=START,
    body=ReasonIn,
    namespaced=True,
    if_match=True,
)
def resume_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Fire again from now on, under the caller's authority."""
    return _resume(namespace, schedule_id)


@operation(
    bp,
    "POST",
    f"{ONE}/enable",
    summary="Resume a schedule (alias, If-Match)",
    grant=START,
    body=ReasonIn,
    namespaced=True,
    if_match=True,
)
def enable_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Fire again from now on, under the caller's authority."""
    return _resume(namespace, schedule_id)


@operation(
    bp,
    "POST",
    f"{ONE}/delete",
    summary="Delete a schedule (soft, If-Match)",
    grant=CHANGE,
    body=ReasonIn,
    namespaced=True,
    if_match=True,
)
def delete_schedule_post(namespace: Namespace, schedule_id: str) -> Any:
    """Delete a schedule; its revisions, ledger and history stay readable."""
    return _delete(namespace, schedule_id)


@operation(
    bp,
    "DELETE",
    ONE,
    summary="Delete a schedule (soft, If-Match)",
    grant=CHANGE,
    namespaced=True,
    if_match=True,
)
def delete_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Delete a schedule; its revisions, ledger and history stay readable."""
    return _delete(namespace, schedule_id)


@operation(
    bp,
    "POST",
    f"{ONE}/trigger",
    summary="Start a run now under the overlap policy",
    grant=START,
    body=TriggerIn,
    namespaced=True,
)
def trigger_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Trigger the schedule now; returns the run id, or null with the skip reason."""
    body = parse_body(TriggerIn)
    result = manual.trigger(
        context.session(),
        context.now(),
        namespace,
        command(body.reason),
        schedule_id,
        body.overlap_policy,
    )
    context.session().commit()
    return jsonify({"outcome": result.outcome, "run_id": result.run_id, "reason": result.reason})


@operation(
    bp,
    "POST",
    f"{ONE}/backfill",
    summary="Start runs for past occurrences [from, to)",
    grant=START,
    body=BackfillIn,
    namespaced=True,
)
def backfill_schedule(namespace: Namespace, schedule_id: str) -> Any:
    """Start one run per canonical occurrence in [from, to) that has none yet."""
    body = parse_body(BackfillIn)
    start, end = _instant(body.from_, "from"), _instant(body.to, "to")
    result = manual.backfill(
        context.session(),
        context.now(),
        namespace,
        command(body.reason),
        schedule_id,
        start,
        end,
        body.overlap_policy,
    )
    context.session().commit()
    return jsonify(
        {"results": result.results, "started": result.started, "skipped": result.skipped}
    )


@operation(
    bp,
    "GET",
    f"{ONE}/occurrences",
    summary="The occurrence ledger, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[("limit", "1-100"), ("cursor", "next_cursor of a page")],
)
def list_occurrences(namespace: Namespace, schedule_id: str) -> Any:
    """List started, buffered and skipped occurrences, newest first."""
    limit, key = page_args(namespace.name, "schedule-occurrences")
    session = context.session()
    schedule = store.get(session, namespace, schedule_id)
    after = None
    if key is not None:
        if len(key) != 3 or key[0] != schedule.uid or not isinstance(key[2], int):
            raise InvalidCursor("the cursor belongs to another schedule's ledger")
        after = (parse_instant(key[1]), key[2])
    items, next_key = queries.occurrences(session, schedule, limit, after)
    key = [schedule.uid, *next_key] if next_key is not None else None
    return jsonify(page_json(namespace.name, "schedule-occurrences", items, key))


@operation(
    bp,
    "GET",
    f"{ONE}/history",
    summary="The schedule's audit stream",
    grant=RUN_READ,
    namespaced=True,
    query=[("limit", "1-500, default 100"), ("after_sequence", "next_cursor of a page")],
)
def schedule_history(namespace: Namespace, schedule_id: str) -> Any:
    """Page through the audit stream by sequence."""
    # This stream pages by `after_sequence`, not by the lists' `cursor`: a generic list reader
    # sending `cursor=` got page one again forever. It is refused, saying what to send instead.
    if request.args.get("cursor"):
        msg = "this stream pages by after_sequence: send a page's next_cursor as after_sequence"
        raise InvalidCursor(msg, errors=[{"loc": ["query", "cursor"], "msg": msg}])
    limit = query_int("limit", 100, 1, queries.MAX_HISTORY_LIMIT)
    after = queries.parse_after_sequence(request.args.get("after_sequence"))
    session = context.session()
    schedule = store.get(session, namespace, schedule_id)
    return jsonify(queries.history(session, namespace, schedule, limit, after))


def _instant(text: str, field: str) -> datetime:
    # `from` and `to` bound [from, to): finer than a microsecond, each rounds up.
    try:
        return parse_instant(text, (field,), round_up=True)
    except CalendarError as exc:
        raise invalid([field], exc.msg) from None


def _int_key(key: list[Any] | None) -> int | None:
    if key is None:
        return None
    if len(key) != 1 or not isinstance(key[0], int):
        raise InvalidCursor("the cursor is not valid for this list")
    return int(key[0])


def _labels() -> tuple[tuple[str, str], ...]:
    return tuple(label_pair(raw, ("query", "label")) for raw in request.args.getlist("label"))
