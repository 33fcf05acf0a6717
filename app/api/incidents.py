"""Incidents of runs: the two lists, and resolving one (retry, skip or fail)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from app import context
from app.api import errors
from app.api.routing import (
    PAGE,
    command,
    one_of,
    operation,
    page_args,
    page_json,
    parse_body,
)
from app.api.run_models import IncidentResolveIn
from app.auth.grants import RUN_MANAGE, RUN_READ
from app.calendar import format_utc
from app.db import Namespace, RunIncident
from app.errors import ValidationFailed
from app.runs import incidents, service

bp = Blueprint("api_incidents", __name__)
errors.register(bp)


def incident_json(incident: RunIncident, run_id: str) -> dict[str, Any]:
    return {
        "id": incident.id,
        "run_id": run_id,
        "node_id": incident.node_id,
        "branch_path": list(incident.branch_path or []),
        "error": incident.error,
        "attempts": incident.attempts,
        "opened_at": format_utc(incident.opened_at),
        "resolved_at": format_utc(incident.resolved_at) if incident.resolved_at else None,
        "resolution": incident.resolution,
        "report": incident.report,
    }


def _status_arg() -> str | None:
    status = request.args.get("status") or None
    if status is not None and status not in incidents.STATUSES:
        raise ValidationFailed(
            [{"loc": ["query", "status"], "msg": f"must be one of {', '.join(incidents.STATUSES)}"}]
        )
    return status


def _page(namespace: Namespace, collection: str, run: Any = None) -> Any:
    status = _status_arg()
    limit, after = page_args(namespace.name, collection)
    rows, key = incidents.list_incidents(
        context.session(), namespace, limit, after, status=status, run=run
    )
    items = [incident_json(i, r) for i, r in rows]
    return jsonify(page_json(namespace.name, collection, items, key))


@operation(
    bp,
    "GET",
    "/incidents",
    summary="Incidents of the namespace's runs, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[("status", "open or resolved", one_of(incidents.STATUSES)), *PAGE],
)
def list_incidents(namespace: Namespace) -> Any:
    """List incidents, optionally only the open or the resolved ones."""
    return _page(namespace, "incidents")


@operation(
    bp,
    "GET",
    "/runs/<run_id>/incidents",
    summary="A run's incidents, newest first",
    grant=RUN_READ,
    namespaced=True,
    query=[("status", "open or resolved", one_of(incidents.STATUSES)), *PAGE],
)
def run_incidents(namespace: Namespace, run_id: str) -> Any:
    """List one run's incidents."""
    run = service.get_run(context.session(), namespace, run_id)
    return _page(namespace, f"run-incidents:{run.uid}", run)


@operation(
    bp,
    "POST",
    "/runs/<run_id>/incidents/<incident_id>/resolve",
    summary="Resolve an incident: retry the step, skip it with an output, or fail the run",
    grant=RUN_MANAGE,
    body=IncidentResolveIn,
    namespaced=True,
)
def resolve_incident(namespace: Namespace, run_id: str, incident_id: str) -> Any:
    """Resolve an open incident; answers it with its recovery report."""
    body = parse_body(IncidentResolveIn)
    session = context.session()
    incident, run = incidents.resolve(
        session,
        context.now(),
        namespace,
        run_id,
        incident_id,
        body.action,
        body.output,
        command().to_json(),
    )
    session.commit()
    return jsonify(incident_json(incident, run.run_id))
