"""Once secret, stays secret in the audit stream: schedule inputs inside event payloads are
shown with `***` at every path any version of their workflow marks secret.

Events keep what was saved then, so an input saved before a version marked a property secret
holds it in plaintext; it is masked when shown, never rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from app.db import Namespace
from app.db.runs import Activation, Workflow, WorkflowVersion
from app.runs import secrets


def input_schemas(
    session: Session, namespace: Namespace, workflow: str, payloads: Iterable[Mapping[str, Any]]
) -> list[Any]:
    """The input schemas, among every version of the workflows these payloads' actions name
    (and of `workflow`, the schedule's own), that mark something secret: one query."""
    actions = [p["action"] for p in payloads if isinstance(p.get("action"), Mapping)]
    if not actions:
        # A page of runs, pauses and skips copies no input: nothing to read.
        return []
    names = {workflow} | {a["workflow"] for a in actions if isinstance(a.get("workflow"), str)}
    named: ColumnElement[bool] = Workflow.name.in_(names)
    pins = {a["activation_id"] for a in actions if isinstance(a.get("activation_id"), str)}
    if pins:
        # A schedule pinned to an activation names no workflow in its action.
        pinned = select(Activation.workflow_id).where(Activation.id.in_(pins))
        named = or_(named, Workflow.id.in_(pinned))
    query = (
        select(WorkflowVersion.definition["input_schema"])
        .join(Workflow, Workflow.id == WorkflowVersion.workflow_id)
        .where(Workflow.namespace_id == namespace.id, named)
    )
    return [schema for schema in session.scalars(query) if secrets.has_secrets(schema)]


def masked_payload(payload: dict[str, Any], schemas: list[Any]) -> dict[str, Any]:
    """`payload` with its action's input masked at every path any of `schemas` marks secret."""
    action = payload.get("action")
    if not schemas or not isinstance(action, Mapping) or "input" not in action:
        return payload
    masked = action["input"]
    for schema in schemas:
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
