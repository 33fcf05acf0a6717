"""Almanac's remote client: the Python SDK (`Client`, `AsyncClient`) and the `almanac` command.

It speaks the HTTP JSON API only and needs nothing from the server's code.

The names below load on first use (PEP 562): `from almanac import Client` works as usual, while
the `almanac` command, which lives in `almanac.cli`, starts without importing httpx or asyncio
until a command actually talks to a server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from almanac.version import VERSION

if TYPE_CHECKING:
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
        InvalidId,
        NoAnswer,
        NotFound,
        NotUnicode,
        RevisionConflict,
        Unauthenticated,
        ValidationError,
    )
    from almanac.models import (
        Activation,
        BackfillItem,
        BackfillResult,
        Incident,
        Me,
        Namespace,
        NamespaceRole,
        Occurrence,
        PreviewOccurrence,
        Replay,
        Run,
        RunHistoryEvent,
        Schedule,
        ScheduleHistoryEvent,
        ScheduleHistoryPage,
        SignalResult,
        SimulatedOccurrence,
        Simulation,
        Task,
        TickFailure,
        TickResult,
        TickRow,
        TriggerResult,
        VersionSummary,
        WorkflowVersion,
    )

_HOMES = {
    "almanac.aio": ("AsyncClient", "AsyncScheduleHandle"),
    "almanac.client": ("Client", "ScheduleHandle"),
    "almanac.errors": (
        "AlmanacError",
        "BackendBusy",
        "BadRequest",
        "CalendarInvalid",
        "CapacityExceeded",
        "Conflict",
        "ConnectionFailed",
        "Forbidden",
        "InvalidId",
        "NoAnswer",
        "NotFound",
        "NotUnicode",
        "RevisionConflict",
        "Unauthenticated",
        "ValidationError",
    ),
    "almanac.models": (
        "Activation",
        "BackfillItem",
        "BackfillResult",
        "Incident",
        "Me",
        "Namespace",
        "NamespaceRole",
        "Occurrence",
        "PreviewOccurrence",
        "Replay",
        "Run",
        "RunHistoryEvent",
        "Schedule",
        "ScheduleHistoryEvent",
        "ScheduleHistoryPage",
        "SignalResult",
        "SimulatedOccurrence",
        "Simulation",
        "Task",
        "TickFailure",
        "TickResult",
        "TickRow",
        "TriggerResult",
        "VersionSummary",
        "WorkflowVersion",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = [
    "VERSION",
    "Activation",
    "AlmanacError",
    "AsyncClient",
    "AsyncScheduleHandle",
    "BackendBusy",
    "BackfillItem",
    "BackfillResult",
    "BadRequest",
    "CalendarInvalid",
    "CapacityExceeded",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Incident",
    "InvalidId",
    "Me",
    "Namespace",
    "NamespaceRole",
    "NoAnswer",
    "NotFound",
    "NotUnicode",
    "Occurrence",
    "PreviewOccurrence",
    "Replay",
    "RevisionConflict",
    "Run",
    "RunHistoryEvent",
    "Schedule",
    "ScheduleHandle",
    "ScheduleHistoryEvent",
    "ScheduleHistoryPage",
    "SignalResult",
    "SimulatedOccurrence",
    "Simulation",
    "Task",
    "TickFailure",
    "TickResult",
    "TickRow",
    "TriggerResult",
    "Unauthenticated",
    "ValidationError",
    "VersionSummary",
    "WorkflowVersion",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'almanac' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
