"""Saving schedules (§5.1, §5.2): create, replace with If-Match, and merge-patch updates.

Every function takes the session, the clock's `now`, the namespace, the acting user and its
command context; it raises domain errors and leaves the commit to the caller. A refused request
writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calendar import check_range, format_utc
from app.db import Namespace, Schedule, ScheduleRevision, User
from app.db.session import begin_write
from app.runs import lifecycle, secrets
from app.runs.errors import ActivationNotFound, ActivationNotReady, InputSchemaError
from app.schedules import store
from app.schedules.audit import CommandContext
from app.schedules.config import ScheduleConfig, merge_patch, parse_request
from app.schedules.errors import RevisionConflict, ScheduleDeleted, invalid
from app.schedules.ledger import Writes, account_until, reschedule, resolve_pending, spec_of


def save(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    data: Mapping[str, Any],
    expected_revision: int | None,
) -> tuple[Schedule, bool]:
    """Create a schedule, or replace one with `If-Match`; returns (schedule, created)."""
    schedule_id, config = parse_request(data)
    check_range(config.spec, now)
    if schedule_id is None and expected_revision is not None:
        raise RevisionConflict("If-Match names no schedule: give its 'id'", None)
    begin_write(session)
    existing = store.lock(session, namespace, schedule_id) if schedule_id else None
    if existing is not None and existing.status == "deleted":
        raise ScheduleDeleted(existing.schedule_id)
    if existing is None:
        if expected_revision is not None:
            raise RevisionConflict(
                f"schedule {schedule_id!r} does not exist; save it without If-Match to create it",
                None,
            )
        return _create(session, now, namespace, actor, context, schedule_id, config, data), True
    store.check_revision(existing, expected_revision)
    _replace(session, now, namespace, actor, context, existing, config, data)
    return existing, False


def patch(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str,
    data: Mapping[str, Any],
    expected_revision: int | None,
) -> Schedule:
    """Apply a JSON merge patch (shorthands allowed) to the current configuration."""
    schedule = store.lock_for_change(session, namespace, schedule_id, expected_revision)
    for key in ("id", "schedule_id"):
        if key in data and data[key] != schedule_id:
            raise invalid([key], "a schedule's id cannot change")
    current = store.config_of(schedule).to_json()
    merged = merge_patch(current, {k: v for k, v in data.items() if k not in ("id", "schedule_id")})
    _, config = parse_request(merged)
    check_range(config.spec, now)
    _replace(session, now, namespace, actor, context, schedule, config, data)
    return schedule


def resolve(
    session: Session,
    namespace: Namespace,
    config: ScheduleConfig,
    data: Mapping[str, Any],
    previous_input: Any = None,
) -> lifecycle.RunTarget:
    """The action's target, with its input validated (422 naming the field) and its secret
    properties sealed in `config.action` (`***` keeps the stored secret)."""
    action = config.action
    shorthand = "activation_id" in data
    field = "activation_id" if action["activation_id"] else "workflow"
    loc = [field] if shorthand and field == "activation_id" else ["action", field]
    try:
        target = lifecycle.resolve_target(
            session, namespace, workflow=action["workflow"], activation_id=action["activation_id"]
        )
    except ActivationNotFound:
        raise invalid(
            loc,
            f"activation {action['activation_id']!r} does not exist in "
            f"namespace {namespace.name!r}",
        ) from None
    except ActivationNotReady as exc:
        raise invalid(loc, exc.message) from None
    schema = target.version.definition.get("input_schema")
    prefix: list[str | int] = ["input"] if "input" in data else ["action", "input"]
    secrets.refuse_sealed_text(_client_input(data), prefix)
    # A merge patch carries the stored (sealed) input: validate the plaintext it stands for.
    plain = secrets.restore_masked(schema, secrets.unseal(action["input"]), previous_input)
    plain = secrets.unseal(plain)
    try:
        lifecycle.validate_input(target.version.definition, plain)
    except InputSchemaError as exc:
        errors = [
            {"loc": [*prefix, *err["loc"][1:]], "msg": err["msg"]}
            for err in exc.details.get("errors", [])
        ]
        raise InputSchemaError(exc.message, errors=errors) from None
    action["input"] = secrets.seal(schema, plain, previous_input)
    return target


def _client_input(data: Mapping[str, Any]) -> Any:
    """The input as the client sent it (None when a patch leaves the stored one alone)."""
    if "input" in data:
        return data["input"]
    action = data.get("action")
    return action.get("input") if isinstance(action, Mapping) else None


def snapshot(session: Session, schedule: Schedule, now: datetime) -> None:
    """Write the immutable revision row of the schedule's current state."""
    config = store.config_of(schedule).to_json() | {
        "schedule_id": schedule.schedule_id,
        "status": schedule.status,
        "paused_reason": schedule.paused_reason,
        "blocked_reason": schedule.blocked_reason,
    }
    session.add(
        ScheduleRevision(
            schedule_pk=schedule.id,
            revision=schedule.revision,
            config=config,
            principal_id=schedule.principal_id,
            created_at=now,
        )
    )


def _create(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule_id: str | None,
    config: ScheduleConfig,
    data: Mapping[str, Any],
) -> Schedule:
    target = resolve(session, namespace, config, data)
    schedule = Schedule(
        namespace_id=namespace.id,
        schedule_id=schedule_id or f"schedule-{uuid.uuid4().hex[:16]}",
        revision=1,
        status="active",
        principal_id=actor.id,
        workflow_name=target.workflow.name,
        cursor_at=now,
        fires_count=0,
        remaining_runs=config.max_runs,
        skipped_trigger_count=0,
        buffered_count=0,
        history_sequence=0,
        created_at=now,
        updated_at=now,
        **_config_columns(config),
    )
    try:
        # PostgreSQL locks no row for an id that does not exist yet: two creates of one id
        # race here, and the unique constraint picks the winner.
        with session.begin_nested():
            session.add(schedule)
            session.flush()
    except IntegrityError:
        winner = store.find(session, namespace, schedule.schedule_id)
        raise RevisionConflict(
            f"schedule {schedule.schedule_id!r} was just created by another request",
            winner.revision if winner else None,
        ) from None
    reschedule(schedule, config.spec)
    snapshot(session, schedule, now)
    w = Writes()
    w.event(
        schedule,
        now,
        "ScheduleCreated",
        {
            "spec": schedule.spec,
            "action": schedule.action,
            "overlap_policy": schedule.overlap_policy,
            "next_fire_at": _text(schedule.next_fire_at),
            "command_context": context.to_json(),
        },
    )
    w.flush(session)
    return schedule


def _replace(
    session: Session,
    now: datetime,
    namespace: Namespace,
    actor: User,
    context: CommandContext,
    schedule: Schedule,
    config: ScheduleConfig,
    data: Mapping[str, Any],
) -> None:
    previous = store.config_of(schedule)
    target = resolve(session, namespace, config, data, schedule.action.get("input"))
    changed = config.changed_fields(previous)
    if (
        "max_runs" in changed
        and config.max_runs is not None
        and config.max_runs <= schedule.fires_count
    ):
        raise invalid(
            ["max_runs"],
            f"must be more than the {schedule.fires_count} runs this schedule already started",
        )
    w = Writes()
    fresh_cursor = schedule.status == "blocked" or (
        schedule.status == "active" and "spec" in changed
    )
    if schedule.status == "active" and "spec" in changed:
        # The old calendar's period ends now; the new one starts from a fresh future cursor.
        account_until(w, schedule, now, "updated", context)
    if schedule.status == "blocked":
        resolve_pending(w, schedule, now, context)
        schedule.status, schedule.blocked_reason = "active", None
    if fresh_cursor:
        schedule.cursor_at = max(schedule.cursor_at or now, now)
    for name, value in _config_columns(config).items():
        setattr(schedule, name, value)
    if "max_runs" in changed:
        schedule.remaining_runs = (
            None if config.max_runs is None else config.max_runs - schedule.fires_count
        )
    schedule.workflow_name = target.workflow.name
    schedule.principal_id = actor.id
    schedule.revision += 1
    schedule.updated_at = now
    if schedule.status == "active":
        reschedule(schedule, spec_of(schedule))
    snapshot(session, schedule, now)
    w.event(
        schedule,
        now,
        "ScheduleUpdated",
        {
            "changed_fields": changed,
            "spec": schedule.spec,
            "action": schedule.action,
            "overlap_policy": schedule.overlap_policy,
            "next_fire_at": _text(schedule.next_fire_at),
            "command_context": context.to_json(),
        },
    )
    w.flush(session)


def _config_columns(config: ScheduleConfig) -> dict[str, Any]:
    data = config.to_json()
    return {
        name: data[name]
        for name in (
            "spec",
            "action",
            "overlap_policy",
            "missed_policy",
            "jitter_seconds",
            "max_runs",
            "labels",
            "memo",
            "search_attributes",
            "notes",
        )
    }


def _text(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)
