"""Tables, sessions and the clock (layer 2). Importing this registers every table."""

from __future__ import annotations

# Imported for its session hooks: commits that make work claimable announce it.
from app.db import announce  # noqa: F401
from app.db.accounts import ApiToken, Membership, Namespace, User
from app.db.base import Base, JSONType, UTCDateTime, new_uid
from app.db.rollup import RunRollup
from app.db.runs import (
    ACTIVE_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    Activation,
    Deadline,
    Run,
    RunBranch,
    RunHistoryEvent,
    RunIncident,
    Signal,
    Task,
    Workflow,
    WorkflowVersion,
)
from app.db.schedules import (
    SCHEDULE_STATUSES,
    Schedule,
    ScheduleHistoryEvent,
    ScheduleOccurrence,
    ScheduleRevision,
)
from app.db.security import ConsoleSession, LoginFailure
from app.db.session import Database, make_engine, normalize_url
from app.db.system import ClockState, SchedulerCursor, TickerBeat

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "FINAL_RUN_STATUSES",
    "Activation",
    "Deadline",
    "Run",
    "RunBranch",
    "RunHistoryEvent",
    "RunIncident",
    "RunRollup",
    "SCHEDULE_STATUSES",
    "Schedule",
    "ScheduleHistoryEvent",
    "ScheduleOccurrence",
    "ScheduleRevision",
    "Signal",
    "Task",
    "Workflow",
    "WorkflowVersion",
    "ApiToken",
    "Base",
    "ClockState",
    "ConsoleSession",
    "LoginFailure",
    "Database",
    "JSONType",
    "Membership",
    "Namespace",
    "SchedulerCursor",
    "TickerBeat",
    "UTCDateTime",
    "User",
    "make_engine",
    "new_uid",
    "normalize_url",
]
