"""Deploying workflow definitions as immutable versions, and activating or retiring them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import Namespace, Schedule
from app.db.base import upsert_insert
from app.db.runs import Activation, Workflow, WorkflowVersion
from app.errors import ValidationFailed
from app.inputs import ascii_int
from app.paging import created_key, keyset, newest_first, split_page
from app.runs import secrets
from app.runs.definitions import validate_definition
from app.runs.errors import ActivationNotFound, WorkflowNotFound, WorkflowVersionNotFound
from app.runs.locking import begin_write, for_update


def deploy(
    session: Session, now: datetime, namespace: Namespace, definition: Any
) -> WorkflowVersion:
    """Validate `definition` and store it as the workflow's next version; the caller commits."""
    validate_definition(definition)
    begin_write(session)
    name = definition["name"]
    query = for_update(
        session,
        select(Workflow).where(Workflow.namespace_id == namespace.id, Workflow.name == name),
    )
    flow = session.scalar(query)
    if flow is None:
        # Two first deploys of one name at once: the second's insert finds the first's row
        # (waiting for its commit) and becomes a no-op, and both go on to lock that row, so each
        # gets its own next version instead of one failing on the unique name.
        insert = upsert_insert(session.get_bind().dialect.name)
        session.execute(
            insert(Workflow)
            .values(namespace_id=namespace.id, name=name, created_at=now)
            .on_conflict_do_nothing(index_elements=["namespace_id", "name"])
        )
        flow = session.scalars(query).one()
    latest = (
        session.scalar(
            select(func.max(WorkflowVersion.version)).where(WorkflowVersion.workflow_id == flow.id)
        )
        or 0
    )
    version = WorkflowVersion(
        workflow_id=flow.id, version=latest + 1, definition=definition, created_at=now
    )
    session.add(version)
    session.flush()
    return version


def get_workflow(session: Session, namespace: Namespace, name: str) -> Workflow:
    flow = session.scalar(
        select(Workflow).where(Workflow.namespace_id == namespace.id, Workflow.name == name)
    )
    if flow is None:
        raise WorkflowNotFound(name)
    return flow


def get_version(session: Session, flow: Workflow, version: int | None = None) -> WorkflowVersion:
    """A given version of `flow`, or its newest."""
    query = select(WorkflowVersion).where(WorkflowVersion.workflow_id == flow.id)
    if version is not None:
        query = query.where(WorkflowVersion.version == version)
    found = session.scalar(query.order_by(WorkflowVersion.version.desc()).limit(1))
    if found is None:
        raise WorkflowVersionNotFound(flow.name, version or 0)
    return found


def list_versions(session: Session, flow: Workflow) -> list[WorkflowVersion]:
    return list(
        session.scalars(
            select(WorkflowVersion)
            .where(WorkflowVersion.workflow_id == flow.id)
            .order_by(WorkflowVersion.version)
        )
    )


def list_workflows(
    session: Session, namespace: Namespace, limit: int, after: list[Any] | None
) -> tuple[list[tuple[Workflow, WorkflowVersion]], list[Any] | None]:
    """Workflows by name with their newest version, one keyset page."""
    newest = (
        select(WorkflowVersion.workflow_id, func.max(WorkflowVersion.version).label("v"))
        .group_by(WorkflowVersion.workflow_id)
        .subquery()
    )
    query = (
        select(Workflow, WorkflowVersion)
        .join(newest, newest.c.workflow_id == Workflow.id)
        .join(
            WorkflowVersion,
            (WorkflowVersion.workflow_id == Workflow.id) & (WorkflowVersion.version == newest.c.v),
        )
        .where(Workflow.namespace_id == namespace.id)
    )
    position = [str(after[0])] if after else None
    query = keyset(query, [Workflow.name], position, limit, descending=False)
    rows = [(row[0], row[1]) for row in session.execute(query)]
    return split_page(rows, limit, lambda row: [row[0].name])


# Versions are 32-bit integers in the database; a larger number can name none of them.
MAX_VERSION = 2**31 - 1


def version_number(raw: str | None, loc: list[str | int]) -> int | None:
    """A version named in a query or a form: None when not given, else 1 to `MAX_VERSION` in
    ASCII digits, or 422 naming `loc` (the API and the console read it alike)."""
    if not raw:
        return None
    number = ascii_int(raw)
    if number is None or not 1 <= number <= MAX_VERSION:
        raise ValidationFailed([{"loc": loc, "msg": "must be a version number"}])
    return number


def activate(
    session: Session, now: datetime, namespace: Namespace, workflow: str, version: int | None = None
) -> tuple[Activation, Workflow, WorkflowVersion]:
    """Make a version (default: the newest) runnable; the caller commits."""
    begin_write(session)
    flow = get_workflow(session, namespace, workflow)
    found = get_version(session, flow, version)
    activation = Activation(
        namespace_id=namespace.id,
        workflow_id=flow.id,
        workflow_version_id=found.id,
        status="ready",
        created_at=_after_newest(session, flow, now),
    )
    session.add(activation)
    session.flush()
    _seal_following_schedules(session, namespace, flow, found)
    return activation, flow, found


def _seal_following_schedules(
    session: Session, namespace: Namespace, flow: Workflow, version: WorkflowVersion
) -> None:
    """Schedules of this workflow: what the new version marks secret in their stored input is
    sealed now, not left in plaintext until their next save. Those that follow the workflow
    start the new version from now on; those pinned to an older activation too, since once
    secret, a value stays secret (their actions still receive the plaintext). Only the
    representation changes (as `secrets rotate` does): no revision, no audit event."""
    schema = version.definition.get("input_schema")
    if not secrets.has_secrets(schema):
        return
    following = session.scalars(
        select(Schedule).where(
            Schedule.namespace_id == namespace.id,
            Schedule.workflow_name == flow.name,
            Schedule.status != "deleted",
        )
    )
    for schedule in following:
        action = schedule.action
        sealed = secrets.seal(schema, action.get("input"))
        if sealed != action.get("input"):
            schedule.action = {**action, "input": sealed}


def _after_newest(session: Session, flow: Workflow, now: datetime) -> datetime:
    """`now`, or a microsecond after the workflow's newest activation when that is not older.

    "The newest ready activation" is the one made last. Two made within one tick of a frozen
    (manual) clock, or of a clock set back, would otherwise tie on `created_at` and be told
    apart by their random ids. The workflow's row is locked first (PostgreSQL; SQLite holds
    the write lock), so two activations made at once queue instead of reading one newest time.
    """
    session.execute(for_update(session, select(Workflow.id).where(Workflow.id == flow.id)))
    newest = session.scalar(
        select(func.max(Activation.created_at)).where(Activation.workflow_id == flow.id)
    )
    if newest is None or newest < now:
        return now
    return newest + timedelta(microseconds=1)


def get_activation(session: Session, namespace: Namespace, activation_id: str) -> Activation:
    activation = session.get(Activation, activation_id)
    if activation is None or activation.namespace_id != namespace.id:
        raise ActivationNotFound(activation_id)
    return activation


def retire(session: Session, now: datetime, namespace: Namespace, activation_id: str) -> Activation:
    """Retire an activation (a no-op when it already is): new runs can no longer use it."""
    begin_write(session)
    activation = get_activation(session, namespace, activation_id)
    if activation.status != "retired":
        activation.status = "retired"
        activation.retired_at = now
    return activation


def list_activations(
    session: Session,
    namespace: Namespace,
    limit: int,
    after: list[Any] | None,
    *,
    workflow: str | None = None,
    status: str | None = None,
) -> tuple[list[tuple[Activation, Workflow, WorkflowVersion]], list[Any] | None]:
    """Activations newest first, one keyset page."""
    query = (
        select(Activation, Workflow, WorkflowVersion)
        .join(
            Workflow,
            (Workflow.id == Activation.workflow_id) & (Workflow.namespace_id == namespace.id),
        )
        .join(WorkflowVersion, WorkflowVersion.id == Activation.workflow_version_id)
        .where(Activation.namespace_id == namespace.id)
    )
    if workflow:
        query = query.where(Workflow.name == workflow)
    if status:
        query = query.where(Activation.status == status)
    query = newest_first(query, Activation.created_at, Activation.id, after, limit)
    rows = [(r[0], r[1], r[2]) for r in session.execute(query)]
    return split_page(rows, limit, lambda r: created_key(r[0]))
