"""The activation a schedule's action starts: resolved with its input validated when saving
(422 naming the field), checked to be ready when resuming (409)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.db import Namespace, Schedule
from app.runs import lifecycle, secrets
from app.runs.errors import ActivationNotFound, ActivationNotReady, InputSchemaError
from app.schedules.config import ScheduleConfig
from app.schedules.errors import ScheduleStateConflict, invalid


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
    field = "activation_id" if action["activation_id"] else "workflow"
    # Name the field where the request wrote it: top level (a shorthand) or inside `action`.
    loc = [field] if field in data else ["action", field]
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


def check_for_resume(session: Session, namespace: Namespace, schedule: Schedule) -> None:
    """Resume needs a ready target: 409 `activation_not_ready` otherwise."""
    action = schedule.action
    try:
        lifecycle.resolve_target(
            session,
            namespace,
            workflow=action.get("workflow"),
            activation_id=action.get("activation_id"),
        )
    except (ActivationNotFound, ActivationNotReady) as exc:
        raise ScheduleStateConflict(
            f"cannot resume: {exc.message}; save the schedule with a ready target",
            reason="activation_not_ready",
        ) from None
