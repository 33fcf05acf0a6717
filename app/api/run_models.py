"""Request bodies of the workflow, activation, run, signal and task routes (docs/api.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from app.api.models import Strict


class StepIn(Strict):
    """One step (documentation: the deploy route validates definitions itself, naming the step)."""

    model_config = ConfigDict(extra="allow")
    id: str
    type: str = Field(description="action | wait | signal | task | parallel")


class DefinitionIn(Strict):
    """A workflow definition (docs/runs.md)."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=4096)
    input_schema: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: int | None = Field(default=None, ge=1, le=366 * 86400)
    on_step_failure: str = Field(
        default="fail", description="fail | incident (suspend the run for an operator)"
    )
    steps: list[StepIn]


class ActivationIn(Strict):
    workflow: str = Field(min_length=1, max_length=128)
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)


class RunIn(Strict):
    """Start a run of `workflow` (its newest ready activation) or of a pinned `activation_id`."""

    workflow: str | None = Field(default=None, min_length=1, max_length=128)
    activation_id: str | None = Field(default=None, min_length=1, max_length=36)
    input: Any = Field(default_factory=dict)
    run_id: str | None = Field(default=None, min_length=1, max_length=255)
    queue: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$"
    )
    timeout_seconds: int | None = Field(default=None, ge=1, le=366 * 86400)
    labels: dict[str, str] = Field(default_factory=dict, max_length=64)
    memo: dict[str, Any] = Field(default_factory=dict)
    search_attributes: dict[str, str] = Field(default_factory=dict, max_length=64)


class SignalIn(Strict):
    payload: Any = None


class ReasonIn(Strict):
    reason: str | None = Field(default=None, max_length=1024)


class TaskCompleteIn(Strict):
    output: Any = None


class IncidentResolveIn(Strict):
    """Resolve an incident: run the step again, complete it with `output`, or fail the run."""

    action: Literal["retry", "skip", "fail"]
    output: Any = None
