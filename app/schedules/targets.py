"""The activation a schedule's action starts: resolved with its input validated when saving
(422 naming the field), checked to be ready when resuming (409)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.orm import Session

from app.db import Activation, Namespace, Schedule, Workflow, WorkflowVersion
from app.errors import ValidationFailed
from app.runs import lifecycle, secrets
from app.runs.errors import ActivationNotFound, ActivationNotReady
from app.schedules.config import ScheduleConfig
from app.schedules.errors import ScheduleStateConflict

ACTIVATIONS = cast(Table, Activation.__table__)
WORKFLOWS = cast(Table, Workflow.__table__)
VERSIONS = cast(Table, WorkflowVersion.__table__)
# One statement (Core: saves are a hot path) finds the activation, its workflow and definition.
_TARGET = (
    select(ACTIVATIONS.c.status, WORKFLOWS.c.name, VERSIONS.c.definition)
    .select_from(ACTIVATIONS)
    .join(WORKFLOWS, WORKFLOWS.c.id == ACTIVATIONS.c.workflow_id)
    .join(VERSIONS, VERSIONS.c.id == ACTIVATIONS.c.workflow_version_id)
)
_PINNED = _TARGET.where(
    ACTIVATIONS.c.id == bindparam("activation_id"),
    ACTIVATIONS.c.namespace_id == bindparam("namespace_id"),
)
_NEWEST_READY = (
    _TARGET.where(
        WORKFLOWS.c.namespace_id == bindparam("namespace_id"),
        WORKFLOWS.c.name == bindparam("workflow"),
        ACTIVATIONS.c.status == "ready",
    )
    .order_by(ACTIVATIONS.c.created_at.desc(), ACTIVATIONS.c.id.desc())
    .limit(1)
)


class TargetNotReady(ValidationFailed):
    """The action names no ready activation (unknown, retired, or none for the workflow)."""


@dataclass(frozen=True)
class Target:
    """What a saved schedule's runs will execute: the workflow's name and its definition."""

    workflow_name: str
    definition: dict[str, Any]


def find(
    session: Session, namespace: Namespace, workflow: str | None, activation_id: str | None
) -> Target:
    """The pinned activation (must be ready), or the newest ready activation of `workflow`."""
    conn = session.connection()
    if activation_id is not None:
        params = {"activation_id": activation_id, "namespace_id": namespace.id}
        row = conn.execute(_PINNED, params).first()
        if row is None:
            raise ActivationNotFound(activation_id)
        if row.status != "ready":
            raise ActivationNotReady(
                f"activation {activation_id!r} is retired", activation_id=activation_id
            )
    else:
        params = {"workflow": workflow, "namespace_id": namespace.id}
        row = conn.execute(_NEWEST_READY, params).first()
        if row is None:
            raise ActivationNotReady(
                f"workflow {workflow!r} has no ready activation", workflow=workflow
            )
    return Target(row.name, row.definition)


def resolve(
    session: Session,
    namespace: Namespace,
    config: ScheduleConfig,
    data: Mapping[str, Any],
    previous_input: Any = None,
) -> Target:
    """The action's target, with its input validated (422 naming the field) and its secret
    properties sealed in `config.action` (`***` keeps the stored secret)."""
    action = config.action
    field = "activation_id" if action["activation_id"] else "workflow"
    # Name the field where the request wrote it: top level (a shorthand) or inside `action`.
    loc = [field] if field in data else ["action", field]
    try:
        target = find(session, namespace, action["workflow"], action["activation_id"])
    except ActivationNotFound:
        message = (
            f"activation {action['activation_id']!r} does not exist in namespace {namespace.name!r}"
        )
        raise TargetNotReady([{"loc": loc, "msg": message}]) from None
    except ActivationNotReady as exc:
        raise TargetNotReady([{"loc": loc, "msg": exc.message}]) from None
    schema = target.definition.get("input_schema")
    prefix: list[str | int] = ["input"] if "input" in data else ["action", "input"]
    sent = _client_input(data)
    secrets.refuse_sealed_text(sent, prefix)
    if sent is None and secrets.undecryptable(action["input"]):
        # A save that leaves the input alone keeps it as stored, secrets no configured key
        # opens included (the runs that need them fail until their values are sent again).
        return target
    # A merge patch carries the stored (sealed) input: validate the plaintext it stands for.
    restored = secrets.restore_masked(schema, action["input"], previous_input)
    lost = secrets.undecryptable(restored)
    if lost and restored == previous_input:
        # The stored input sent back as shown (*** for the lost secret, as the console's edit
        # form does): the input is left alone, so it is kept as stored.
        action["input"] = previous_input
        return target
    if lost:
        raise ValidationFailed(
            [{"loc": [*prefix, *path], "msg": LOST_SECRET} for path in lost],
        )
    plain = secrets.unseal(restored)
    # A workflow without an input schema accepts any input: no validator to build
    # (`false` is a schema: it refuses every input).
    if schema not in (None, {}, True):
        lifecycle.validate_input(target.definition, plain, prefix)
    action["input"] = secrets.keep_sealed(
        previous_input, secrets.seal(schema, plain, previous_input)
    )
    return target


LOST_SECRET = (
    "the stored secret cannot be decrypted with the configured keys (its key was dropped or "
    "changed): send its value again instead of ***"
)


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
        find(session, namespace, action.get("workflow"), action.get("activation_id"))
    except (ActivationNotFound, ActivationNotReady) as exc:
        raise ScheduleStateConflict(
            f"cannot resume: {exc.message}; save the schedule with a ready target",
            reason="activation_not_ready",
        ) from None
