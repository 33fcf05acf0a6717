"""Request bodies of the workflow, activation, run, signal and task routes (docs/api.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from app.api.models import Strict, keyed_strings
from app.runs.definitions import MAX_STEPS, NAME_RE, STEP_ID_RE
from app.schedules.config import (
    LABEL_KEY,
    LABEL_KEY_RULE,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MAX_REASON,
    MAX_SEARCH_ATTRIBUTES,
)


class StepIn(Strict):
    """One step (documentation: the deploy route validates definitions itself, naming the step;
    the bounds published here are the ones it applies)."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(max_length=128, pattern=f"^{STEP_ID_RE.pattern}$")
    type: Literal["action", "wait", "signal", "task", "parallel"]


class DefinitionIn(Strict):
    """A workflow definition (docs/runs.md)."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=4096)
    input_schema: dict[str, Any] | bool = Field(
        default_factory=dict, description="A JSON Schema: an object, or true / false"
    )
    timeout_seconds: int | None = Field(default=None, ge=1, le=366 * 86400)
    on_step_failure: Literal["fail", "incident"] = Field(
        default="fail", description="fail, or incident (suspend the run for an operator)"
    )
    steps: list[StepIn] = Field(min_length=1, max_length=MAX_STEPS)


# A workflow's name as deploys allow it, matched whole: `flow\n` is refused, not looked up.
WORKFLOW_NAME = f"^{NAME_RE.pattern}$"


class ActivationIn(Strict):
    workflow: str = Field(min_length=1, max_length=128, pattern=WORKFLOW_NAME)
    version: int | None = Field(default=None, ge=1, le=2**31 - 1)


# A run's queue, as a run names it and a worker takes it (`worker --queue`).
QUEUE_NAME = r"^[A-Za-z0-9._-]+$"
QUEUE_MAX = 64


class RunIn(Strict):
    """Start a run of `workflow` (its newest ready activation) or of a pinned `activation_id`."""

    workflow: str | None = Field(default=None, min_length=1, max_length=128, pattern=WORKFLOW_NAME)
    activation_id: str | None = Field(default=None, min_length=1, max_length=36)
    input: Any = Field(default_factory=dict)
    run_id: str | None = Field(default=None, min_length=1, max_length=255)
    queue: str | None = Field(default=None, min_length=1, max_length=QUEUE_MAX, pattern=QUEUE_NAME)
    timeout_seconds: int | None = Field(default=None, ge=1, le=366 * 86400)
    labels: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_LABELS,
        json_schema_extra=keyed_strings(MAX_LABELS, MAX_LABEL_VALUE),
    )
    memo: dict[str, Any] = Field(default_factory=dict)
    search_attributes: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_SEARCH_ATTRIBUTES,
        json_schema_extra=keyed_strings(MAX_SEARCH_ATTRIBUTES),
    )

    @field_validator("labels")
    @classmethod
    def _labels_as_schedules_have_them(cls, labels: dict[str, str]) -> dict[str, str]:
        # The rule of a schedule's labels, which its runs carry: `?label=k:v` matches either.
        for key, value in labels.items():
            if not LABEL_KEY.fullmatch(key):
                raise ValueError(f"label key {key!r}: {LABEL_KEY_RULE}")
            if len(value) > MAX_LABEL_VALUE:
                raise ValueError(f"label {key!r}: a value is at most {MAX_LABEL_VALUE} characters")
        return labels

    @field_validator("search_attributes")
    @classmethod
    def _keys_a_filter_can_name(cls, attributes: dict[str, str]) -> dict[str, str]:
        # `?search_attribute=k:v` splits at the first colon: keys follow the labels' rule.
        for key in attributes:
            if not LABEL_KEY.fullmatch(key):
                raise ValueError(f"search attribute key {key!r}: {LABEL_KEY_RULE}")
        return attributes


class SignalIn(Strict):
    payload: Any = None


class ReasonIn(Strict):
    reason: str | None = Field(default=None, max_length=MAX_REASON)


class TaskCompleteIn(Strict):
    output: Any = None


class IncidentResolveIn(Strict):
    """Resolve an incident: run the step again, complete it with `output`, or fail the run."""

    action: Literal["retry", "skip", "fail"]
    output: Any = None
