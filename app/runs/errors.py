"""Errors raised by the workflows and runs services."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.calendar import format_utc
from app.errors import AlmanacError, Conflict, NotFound, ValidationFailed


class WorkflowNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"workflow {name!r} does not exist", workflow=name)


class ActivationNotFound(NotFound):
    def __init__(self, activation_id: str) -> None:
        super().__init__(
            f"activation {activation_id!r} does not exist", activation_id=activation_id
        )


class ActivationNotReady(Conflict):
    """A retired pinned activation, or a workflow with no ready activation."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message, **details)


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} does not exist", run_id=run_id)


class RunAlreadyExists(Conflict):
    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} already exists, started for another workflow or activation: "
            "a run id names one run; choose another id",
            run_id=run_id,
        )


class RunFinished(Conflict):
    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id!r} is already {status}", run_id=run_id, status=status)


class RunTimedOut(RunFinished):
    """The run's timeout is due: it is finished, even before the scanner has recorded it."""

    def __init__(self, run_id: str, due_at: datetime) -> None:
        Conflict.__init__(
            self,
            f"run {run_id!r} timed out at {format_utc(due_at)}",
            run_id=run_id,
            status="timed_out",
        )


class InputSchemaError(AlmanacError):
    code = "INPUT_SCHEMA"


class WorkflowVersionNotFound(NotFound):
    def __init__(self, name: str, version: int) -> None:
        super().__init__(
            f"workflow {name!r} has no version {version}", workflow=name, version=version
        )


class TaskNotFound(NotFound):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} does not exist", task_id=task_id)


class TaskClosed(Conflict):
    """A task that is no longer open, or whose deadline has passed."""

    def __init__(self, task_id: str, status: str, message: str | None = None) -> None:
        super().__init__(
            message or f"task {task_id!r} is already {status}", task_id=task_id, status=status
        )


class DefinitionInvalid(ValidationFailed):
    """A workflow definition refused on deploy; names the offending step when there is one."""

    def __init__(self, loc: list[str | int], msg: str, step: str | None = None) -> None:
        where = ".".join(str(part) for part in loc) or "definition"
        prefix = f"step {step!r}: " if step is not None else ""
        super().__init__([{"loc": loc, "msg": msg}], f"{prefix}{where}: {msg}")
        if step is not None:
            self.details["step"] = step

    @classmethod
    def combined(cls, found: list[DefinitionInvalid]) -> DefinitionInvalid:
        """One refusal listing every mistake found; its message and `step` are the first's."""
        first = found[0]
        if len(found) == 1:
            return first
        first.errors = [error for exc in found for error in exc.errors]
        first.details["errors"] = first.errors
        first.message = f"{first.message} (and {len(found) - 1} more: see details.errors)"
        return first


class PayloadTooLarge(AlmanacError):
    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes; the limit is {limit}", size=size, limit=limit)


class ActionNotRegistered(LookupError):
    """A worker met a step whose action is not registered in this process."""
