"""Once secret, stays secret in the audit stream: schedule inputs inside event payloads are
shown with `***` at every path any version of their workflow marks secret.

Events keep what was saved then, so an input saved before a version marked a property secret
holds it in plaintext; it is masked when shown, never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import Namespace
from app.db.runs import Activation, Workflow, WorkflowVersion
from app.runs import secrets


@dataclass(frozen=True)
class Sealed:
    """The input schemas that mark a secret, per workflow (by name), among every version of the
    workflows a history page's events name; and the workflow each pinned activation belongs to."""

    by_workflow: dict[str, list[Any]]
    pinned: dict[str, str]
    default: str

    def schemas_for(self, action: Mapping[str, Any]) -> list[Any]:
        """The schemas of the workflow this event's action names (by name or by its pinned
        activation; the schedule's own when it names neither)."""
        name = action.get("workflow")
        if not isinstance(name, str):
            pin = action.get("activation_id")
            name = self.pinned.get(pin, self.default) if isinstance(pin, str) else self.default
        return self.by_workflow.get(name, [])


def input_schemas(
    session: Session, namespace: Namespace, workflow: str, payloads: Iterable[Mapping[str, Any]]
) -> Sealed:
    """What `masked_payload` needs for these payloads: at most two queries, none for a page
    whose events copy no input."""
    actions = [p["action"] for p in payloads if isinstance(p.get("action"), Mapping)]
    if not actions:
        # A page of runs, pauses and skips copies no input: nothing to read.
        return Sealed({}, {}, workflow)
    names = {workflow} | {a["workflow"] for a in actions if isinstance(a.get("workflow"), str)}
    pins = {a["activation_id"] for a in actions if isinstance(a.get("activation_id"), str)}
    pinned: dict[str, str] = {}
    if pins:
        # A schedule pinned to an activation names no workflow in its action.
        query = (
            select(Activation.id, Workflow.name)
            .join(Workflow, Workflow.id == Activation.workflow_id)
            .where(Activation.id.in_(pins), Workflow.namespace_id == namespace.id)
        )
        pinned = {str(pin): str(name) for pin, name in session.execute(query)}
        names |= set(pinned.values())
    query = (
        select(Workflow.name, WorkflowVersion.definition["input_schema"])
        .join(Workflow, Workflow.id == WorkflowVersion.workflow_id)
        .where(Workflow.namespace_id == namespace.id, Workflow.name.in_(names))
    )
    by_workflow: dict[str, list[Any]] = {}
    for name, schema in session.execute(query):
        if secrets.has_secrets(schema):
            by_workflow.setdefault(name, []).append(schema)
    return Sealed(by_workflow, pinned, workflow)


def masked_payload(payload: dict[str, Any], sealed: Sealed) -> dict[str, Any]:
    """`payload` with its action's input masked at every path any version of the workflow the
    action names marks secret."""
    action = payload.get("action")
    if not sealed.by_workflow or not isinstance(action, Mapping) or "input" not in action:
        return payload
    masked = action["input"]
    for schema in sealed.schemas_for(action):
        masked = _masked(schema, masked)
    return {**payload, "action": {**action, "input": masked}}


def _masked(schema: Any, value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    result = dict(value)
    for name, item in value.items():
        if secrets.secret_path(schema, [name]):
            result[name] = secrets.MASK
        else:
            inner = secrets.schema_at(schema, [name])
            if inner is not None:
                result[name] = _masked(inner, item)
    return result
