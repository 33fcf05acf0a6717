"""The console's workflows page in three statements: a page of workflows, then every version and
every activation of those workflows (never one query per workflow)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import Activation, Namespace, Workflow, WorkflowVersion
from app.paging import keyset, split_page


@dataclass
class WorkflowEntry:
    """A workflow with its versions (newest first) and activations (newest first)."""

    workflow: Workflow
    versions: list[WorkflowVersion] = field(default_factory=list)
    activations: list[Activation] = field(default_factory=list)
    # Activation id -> the version number it runs.
    version_of: dict[str, int] = field(default_factory=dict)

    @property
    def latest(self) -> WorkflowVersion | None:
        return self.versions[0] if self.versions else None

    @property
    def ready(self) -> list[Activation]:
        return [a for a in self.activations if a.status == "ready"]


def catalog(
    session: Session, namespace: Namespace, limit: int, after: list[Any] | None
) -> tuple[list[WorkflowEntry], list[Any] | None]:
    """One page of workflows by name, each with its versions and activations."""
    query = select(Workflow).where(Workflow.namespace_id == namespace.id)
    position = [str(after[0])] if after else None
    query = keyset(query, [Workflow.name], position, limit, descending=False)
    flows, key = split_page(list(session.scalars(query)), limit, lambda flow: [flow.name])
    entries = {flow.id: WorkflowEntry(flow) for flow in flows}
    if not entries:
        return [], key
    numbers: dict[int, int] = {}
    for version in session.scalars(
        select(WorkflowVersion)
        .where(WorkflowVersion.workflow_id.in_(entries))
        .order_by(WorkflowVersion.workflow_id, WorkflowVersion.version.desc())
    ):
        entries[version.workflow_id].versions.append(version)
        numbers[version.id] = version.version
    for activation in session.scalars(
        select(Activation)
        .where(Activation.workflow_id.in_(entries))
        .order_by(Activation.created_at.desc(), Activation.id)
    ):
        entry = entries[activation.workflow_id]
        entry.activations.append(activation)
        entry.version_of[activation.id] = numbers.get(activation.workflow_version_id, 0)
    return list(entries.values()), key
