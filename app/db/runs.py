"""Workflows, versions, activations, runs and their history, deadlines, signals, tasks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, JSONType, UTCDateTime, new_sortable_uid, new_uid

ACTIVE_RUN_STATUSES = ("pending", "running", "waiting", "suspended")
FINAL_RUN_STATUSES = ("completed", "failed", "cancelled", "terminated", "timed_out")
ACTIVATION_STATUSES = ("ready", "retired")


class Workflow(Base):
    __tablename__ = "workflows"
    __table_args__ = (UniqueConstraint("namespace_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class WorkflowVersion(Base):
    """An immutable definition; `version` counts from 1 per workflow."""

    __tablename__ = "workflow_versions"
    __table_args__ = (UniqueConstraint("workflow_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    definition: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Activation(Base):
    """Makes one workflow version runnable; `ready` or `retired`."""

    __tablename__ = "activations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_sortable_uid)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    workflow_version_id: Mapped[int] = mapped_column(ForeignKey("workflow_versions.id"))
    status: Mapped[str] = mapped_column(String(16), default="ready")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("namespace_id", "run_id"),
        Index("ix_runs_schedule_active", "schedule_uid", "status"),
        Index("ix_runs_namespace_status", "namespace_id", "status"),
        # Workers claim in (claimable_at, id) order: the index yields it without a sort.
        Index("ix_runs_claim", "claimable_at", "id"),
        # The newest-first runs list per namespace, and (covering, with status) the overview's
        # runs per hour.
        Index("ix_runs_namespace_created", "namespace_id", "created_at", "id", "status"),
        # A schedule's runs, newest first (its detail page, `GET /runs?schedule_id=`).
        Index("ix_runs_schedule_created", "namespace_id", "schedule_id", "created_at", "id"),
        # One workflow's runs, newest first (`GET /runs?workflow=`).
        Index("ix_runs_workflow_created", "workflow_id", "created_at", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uid)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(String(255))
    workflow_id: Mapped[int] = mapped_column(ForeignKey("workflows.id"))
    workflow_version_id: Mapped[int] = mapped_column(ForeignKey("workflow_versions.id"))
    activation_id: Mapped[str | None] = mapped_column(ForeignKey("activations.id"))
    # The schedule that started this run, if any (plain columns: schedules live in a later layer).
    schedule_uid: Mapped[str | None] = mapped_column(String(36))
    schedule_id: Mapped[str | None] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    input: Mapped[Any] = mapped_column(JSONType, default=dict)
    output: Mapped[Any | None] = mapped_column(JSONType)
    error: Mapped[Any | None] = mapped_column(JSONType)
    step_index: Mapped[int] = mapped_column(Integer, default=0)
    current_step: Mapped[str | None] = mapped_column(String(128))
    step_outputs: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    queue: Mapped[str | None] = mapped_column(String(64))
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    memo: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    search_attributes: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # When a worker may claim the next step (null while waiting or finished).
    claimable_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_sequence: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class RunHistoryEvent(Base):
    __tablename__ = "run_history_events"
    __table_args__ = (UniqueConstraint("run_pk", "sequence"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    sequence: Mapped[int] = mapped_column(Integer)
    event_type: Mapped[str] = mapped_column(String(64))
    node_id: Mapped[str | None] = mapped_column(String(128))
    # Inside parallel branches: the branches the event happened in, outermost first.
    branch_path: Mapped[list[str] | None] = mapped_column(JSONType)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Deadline(Base):
    """One durable timer: a run timeout, a signal or task timeout, or an elapsing wait."""

    __tablename__ = "deadlines"
    __table_args__ = (Index("ix_deadlines_due", "consumed_at", "due_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # run_timeout | signal | task | wait
    node_id: Mapped[str | None] = mapped_column(String(128))
    wait_id: Mapped[str] = mapped_column(String(36), default=new_uid)
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    consumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Signal(Base):
    __tablename__ = "signals"
    __table_args__ = (Index("ix_signals_pending", "run_pk", "name", "status"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_uid)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    payload: Mapped[Any | None] = mapped_column(JSONType)
    accepted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16))  # buffered | consumed | ignored
    reason: Mapped[str | None] = mapped_column(Text)
    node_id: Mapped[str | None] = mapped_column(String(128))
    # Arrival order within the run (1, 2, ...): buffered signals are consumed in this order.
    position: Mapped[int] = mapped_column(Integer, default=0)


class Task(Base):
    """A human task created by a `task` step, completed with a JSON output."""

    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_inbox", "namespace_id", "status"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_sortable_uid)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(String(128))
    title: Mapped[str] = mapped_column(String(256))
    role: Mapped[str | None] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="open")
    output: Mapped[Any | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    completed_by: Mapped[str | None] = mapped_column(String(64))


class RunBranch(Base):
    """A started branch of a parallel step: its own position, lease and held continuation.

    The run row is the root sequence of steps; each branch is a sequence of its own. A branch row
    is only written while its run's row is locked. `path` joins `parallel_id/branch_id` pairs from
    the outermost parallel step in (step ids hold no '/').
    """

    __tablename__ = "run_branches"
    __table_args__ = (
        UniqueConstraint("run_pk", "path"),
        Index("ix_run_branches_claim", "claimable_at", "id"),
        Index("ix_run_branches_parallel", "run_pk", "parallel_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    # Four levels of 128-character ids make 1,031 characters (definitions.longest_branch_path).
    path: Mapped[str] = mapped_column(String(2048))
    parallel_id: Mapped[str] = mapped_column(String(128))
    branch_id: Mapped[str] = mapped_column(String(128))
    position: Mapped[int] = mapped_column(Integer)
    step_index: Mapped[int] = mapped_column(Integer, default=0)
    current_step: Mapped[str | None] = mapped_column(String(128))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    output: Mapped[Any | None] = mapped_column(JSONType)
    claimable_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    # A step finished while an incident was open: what to do next, applied on resolve.
    held: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class RunIncident(Base):
    """An action step that exhausted its retries in a run that asked for incidents."""

    __tablename__ = "run_incidents"
    __table_args__ = (Index("ix_run_incidents_list", "namespace_id", "opened_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_sortable_uid)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(String(128))
    branch_path: Mapped[list[str]] = mapped_column(JSONType, default=list)
    error: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    attempts: Mapped[int] = mapped_column(Integer)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime())
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # retry | skip | fail, or run_timed_out / run_cancelled / ... when the run ended first
    resolution: Mapped[str | None] = mapped_column(String(32))
    report: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
