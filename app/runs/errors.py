"""Errors raised by the workflows and runs services."""

from __future__ import annotations

from typing import Any

from app.errors import AlmanacError, Conflict, NotFound


class WorkflowNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"workflow {name!r} does not exist", workflow=name)


class ActivationNotFound(NotFound):
    def __init__(self, activation_id: str) -> None:
        super().__init__(f"activation {activation_id!r} does not exist", activation_id=activation_id)


class ActivationNotReady(Conflict):
    """A retired pinned activation, or a workflow with no ready activation."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message, **details)


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} does not exist", run_id=run_id)


class RunAlreadyExists(Conflict):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} already exists", run_id=run_id)


class RunFinished(Conflict):
    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id!r} is already {status}", run_id=run_id, status=status)


class InputSchemaError(AlmanacError):
    code = "INPUT_SCHEMA"
