"""Almanac's remote client: the Python SDK (`Client`, `AsyncClient`) and the `almanac` command.

It speaks the HTTP JSON API only and needs nothing from the server's code.
"""

from __future__ import annotations

from almanac.aio import AsyncClient, AsyncScheduleHandle
from almanac.client import Client, ScheduleHandle
from almanac.errors import (
    AlmanacError,
    BackendBusy,
    BadRequest,
    CalendarInvalid,
    CapacityExceeded,
    Conflict,
    ConnectionFailed,
    Forbidden,
    NotFound,
    RevisionConflict,
    Unauthenticated,
    ValidationError,
)
from almanac.models import (
    Activation,
    BackfillResult,
    Incident,
    Me,
    Occurrence,
    Run,
    RunHistoryEvent,
    Schedule,
    ScheduleHistoryEvent,
    ScheduleHistoryPage,
    Simulation,
    Task,
    TriggerResult,
    WorkflowVersion,
)

__all__ = [
    "Activation",
    "AlmanacError",
    "AsyncClient",
    "AsyncScheduleHandle",
    "BackendBusy",
    "BackfillResult",
    "BadRequest",
    "CalendarInvalid",
    "CapacityExceeded",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Incident",
    "Me",
    "NotFound",
    "Occurrence",
    "RevisionConflict",
    "Run",
    "RunHistoryEvent",
    "Schedule",
    "ScheduleHandle",
    "ScheduleHistoryEvent",
    "ScheduleHistoryPage",
    "Simulation",
    "Task",
    "TriggerResult",
    "Unauthenticated",
    "ValidationError",
    "WorkflowVersion",
]
