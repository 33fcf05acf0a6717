"""Workflows and activations routes in docs/api.md."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from app import context
from app.api import errors
from app.api.models import NothingIn
from app.api.routing import PAGE, json_object, one_of, operation, page_args, page_json, parse_body
from app.api.run_models import ActivationIn, DefinitionIn
from app.auth.grants import RUN_READ, WORKFLOW_DEPLOY
from app.calendar import format_utc, format_utc_or_none
from app.db import Activation, Namespace, Workflow, WorkflowVersion
from app.db.runs import ACTIVATION_STATUSES
from app.errors import ValidationFailed
from app.runs import actions, workflows

bp = Blueprint("api_workflows", __name__)
errors.register(bp)


@bp.record_once
def _load_actions(state: Any) -> None:
    # Deploy validates action names, so the configured action modules must be registered.
    actions.load_modules(state.app.config.get("ACTION_MODULES"))


def version_json(flow: Workflow, version: WorkflowVersion) -> dict[str, Any]:
    return {
        "name": flow.name,
        "version": version.version,
        "definition": version.definition,
        "created_at": format_utc(version.created_at),
    }


def activation_json(
    activation: Activation, flow: Workflow, version: WorkflowVersion
) -> dict[str, Any]:
    return {
        "id": activation.id,
        "workflow": flow.name,
        "version": version.version,
        "status": activation.status,
        "created_at": format_utc(activation.created_at),
        "retired_at": format_utc_or_none(activation.retired_at),
    }


@operation(
    bp,
    "POST",
    "/workflows",
    summary="Deploy a workflow definition as its next version",
    grant=WORKFLOW_DEPLOY,
    body=DefinitionIn,
    status=201,
    namespaced=True,
)
def deploy(namespace: Namespace) -> Any:
    """Validate and store a definition as a new immutable version."""
    session = context.session()
    version = workflows.deploy(session, context.now(), namespace, json_object())
    # The answer is read in the transaction that wrote it: a later one is bound to the user's
    # namespaces again, and a user disabled meanwhile would see none (a 500 for a done deploy).
    flow = session.get(Workflow, version.workflow_id)
    assert flow is not None
    answer = version_json(flow, version)
    session.commit()
    return jsonify(answer), 201


@operation(
    bp,
    "GET",
    "/workflows",
    summary="List workflows with their newest version",
    grant=RUN_READ,
    namespaced=True,
    query=PAGE,
)
def list_workflows(namespace: Namespace) -> Any:
    """List workflows by name."""
    limit, after = page_args(namespace.name, "workflows")
    rows, key = workflows.list_workflows(context.session(), namespace, limit, after)
    items = [
        {
            **version_json(flow, version),
            "created_at": format_utc(flow.created_at),
            "updated_at": format_utc(version.created_at),
        }
        for flow, version in rows
    ]
    return jsonify(page_json(namespace.name, "workflows", items, key))


@operation(
    bp,
    "GET",
    "/workflows/<name>",
    summary="A workflow's newest (or given) version",
    grant=RUN_READ,
    namespaced=True,
    query=[("version", "a version number")],
)
def get_workflow(namespace: Namespace, name: str) -> Any:
    """Show a workflow version and the list of its versions."""
    session = context.session()
    flow = workflows.get_workflow(session, namespace, name)
    number = workflows.version_number(request.args.get("version"), ["query", "version"])
    version = workflows.get_version(session, flow, number)
    versions = [
        {"version": v.version, "created_at": format_utc(v.created_at)}
        for v in workflows.list_versions(session, flow)
    ]
    return jsonify({**version_json(flow, version), "versions": versions})


@operation(
    bp,
    "POST",
    "/activations",
    summary="Make a workflow version runnable",
    grant=WORKFLOW_DEPLOY,
    body=ActivationIn,
    status=201,
    namespaced=True,
)
def activate(namespace: Namespace) -> Any:
    """Activate a version (default: the newest)."""
    body = parse_body(ActivationIn)
    session = context.session()
    activation, flow, version = workflows.activate(
        session, context.now(), namespace, body.workflow, body.version
    )
    session.commit()
    return jsonify(activation_json(activation, flow, version)), 201


@operation(
    bp,
    "GET",
    "/activations",
    summary="List activations, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[
        ("workflow", "only this workflow's"),
        ("status", "ready or retired", one_of(ACTIVATION_STATUSES)),
        *PAGE,
    ],
)
def list_activations(namespace: Namespace) -> Any:
    """List activations."""
    status = request.args.get("status") or None
    if status is not None and status not in ACTIVATION_STATUSES:
        raise ValidationFailed([{"loc": ["query", "status"], "msg": "must be ready or retired"}])
    limit, after = page_args(namespace.name, "activations")
    rows, key = workflows.list_activations(
        context.session(),
        namespace,
        limit,
        after,
        workflow=request.args.get("workflow") or None,
        status=status,
    )
    return jsonify(
        page_json(namespace.name, "activations", [activation_json(*row) for row in rows], key)
    )


@operation(
    bp,
    "POST",
    "/activations/<activation_id>/retire",
    summary="Retire an activation",
    grant=WORKFLOW_DEPLOY,
    body=NothingIn,
    namespaced=True,
)
def retire(namespace: Namespace, activation_id: str) -> Any:
    """Retire an activation: new runs can no longer start from it."""
    parse_body(NothingIn)  # a body is refused as any other operation's would be
    session = context.session()
    activation = workflows.retire(session, context.now(), namespace, activation_id)
    flow = session.get(Workflow, activation.workflow_id)
    version = session.get(WorkflowVersion, activation.workflow_version_id)
    assert flow is not None and version is not None
    answer = activation_json(activation, flow, version)
    session.commit()
    return jsonify(answer)
