"""Schedules, their immutable revisions, the occurrence ledger and the audit stream."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, JSONType, UTCDateTime, new_uid

SCHEDULE_STATUSES = ("active", "paused", "blocked", "deleted")


class Schedule(Base):
    """The current state of one schedule; every change also writes a `ScheduleRevision`."""

    __tablename__ = "schedules"
    __table_args__ = (
        UniqueConstraint("namespace_id", "schedule_id"),
        # The tick claims `status = 'active' AND next_fire_at <= now`, namespace by namespace.
        Index("ix_schedules_due", "status", "namespace_id", "next_fire_at", "id"),
        Index("ix_schedules_buffered", "status", "buffered_count"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uid)
    namespace_id: Mapped[int] = mapped_column(ForeignKey("namespaces.id", ondelete="CASCADE"))
    schedule_id: Mapped[str] = mapped_column(String(128))
    revision: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    blocked_reason: Mapped[str | None] = mapped_column(String(32))
    paused_reason: Mapped[str | None] = mapped_column(Text)
    principal_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    # The workflow the action runs (resolved once for a pinned activation), for search.
    workflow_name: Mapped[str] = mapped_column(String(128))
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)
    action: Mapped[dict[str, Any]] = mapped_column(JSONType)
    overlap_policy: Mapped[str] = mapped_column(String(16))
    missed_policy: Mapped[str] = mapped_column(String(16))
    jitter_seconds: Mapped[int] = mapped_column(Integer, default=0)
    max_runs: Mapped[int | None] = mapped_column(Integer)
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    memo: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    search_attributes: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    notes: Mapped[str | None] = mapped_column(Text)
    # Every canonical occurrence <= cursor_at is accounted for (or is `pending_occurrence`).
    cursor_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The next canonical occurrence to consider and its jittered due time.
    next_occurrence: Mapped[datetime | None] = mapped_column(UTCDateTime())
    next_fire_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # An occurrence refused for capacity, retried with the same run id until `pending_until`.
    pending_occurrence: Mapped[datetime | None] = mapped_column(UTCDateTime())
    pending_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    fires_count: Mapped[int] = mapped_column(Integer, default=0)
    remaining_runs: Mapped[int | None] = mapped_column(Integer)
    skipped_trigger_count: Mapped[int] = mapped_column(Integer, default=0)
    last_skip_reason: Mapped[str | None] = mapped_column(String(32))
    last_skipped_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    buffered_count: Mapped[int] = mapped_column(Integer, default=0)
    last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    latest_run_id: Mapped[str | None] = mapped_column(String(255))
    # The last sequence of this schedule's audit stream (allocated under the row lock).
    history_sequence: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ScheduleRevision(Base):
    """An immutable snapshot of a schedule's full configuration at one revision."""

    __tablename__ = "schedule_revisions"
    __table_args__ = (UniqueConstraint("schedule_pk", "revision"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    schedule_pk: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    revision: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    principal_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ScheduleOccurrence(Base):
    """The ledger: a started, buffered or skipped occurrence, or a skipped range."""

    __tablename__ = "schedule_occurrences"
    __table_args__ = (
        Index("ix_schedule_occurrences_schedule_instant", "schedule_pk", "instant", "id"),
        Index("ix_schedule_occurrences_schedule_kind", "schedule_pk", "kind", "instant"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    schedule_pk: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    # scheduled (a canonical occurrence), manual (a trigger) or backfill.
    origin: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))  # started | buffered | skipped
    instant: Mapped[datetime] = mapped_column(UTCDateTime())
    through: Mapped[datetime | None] = mapped_column(UTCDateTime())
    count: Mapped[int] = mapped_column(Integer, default=1)
    reason: Mapped[str | None] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(String(255))
    revision: Mapped[int] = mapped_column(Integer)
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ScheduleHistoryEvent(Base):
    """One event of a schedule's audit stream; `sequence` counts from 1 per schedule."""

    __tablename__ = "schedule_history_events"
    __table_args__ = (UniqueConstraint("schedule_pk", "sequence"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    schedule_pk: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    sequence: Mapped[int] = mapped_column(Integer)
    event_type: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType)
    workflow_instance_id: Mapped[str | None] = mapped_column(String(255))
    workflow_run_id: Mapped[str | None] = mapped_column(String(36))
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime())
