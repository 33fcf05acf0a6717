"""Request bodies of the schedule routes; the service normalizes the shorthands."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from app.api.models import Strict, keyed_strings
from app.schedules.config import (
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MAX_REASON,
    MAX_RUNS_LIMIT,
    MAX_SEARCH_ATTRIBUTES,
    MAX_TIMEOUT_SECONDS,
)

# The server refuses an empty id (published beside the type: binds only when it is a string).
NOT_EMPTY: dict[str, Any] = {"minLength": 1}
OverlapPolicy = Literal[
    "skip", "buffer_one", "buffer_all", "allow_all", "cancel_other", "terminate_other"
]
MissedPolicy = Literal["skip", "fire_once"]


class ActionIn(Strict):
    workflow: str | None = Field(default=None, min_length=1, max_length=128)
    activation_id: str | None = Field(default=None, min_length=1, max_length=36)
    input: Any = None
    execution_timeout_seconds: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_SECONDS)
    run_timeout_seconds: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_SECONDS)
    queue: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$"
    )


class ScheduleIn(Strict):
    """A save request; `cron`, `timezone`, `workflow`, `activation_id`, `input` and `id` are
    shorthands."""

    schedule_id: str | None = Field(default=None, max_length=128, json_schema_extra=NOT_EMPTY)
    id: str | None = Field(default=None, max_length=128, json_schema_extra=NOT_EMPTY)
    spec: dict[str, Any] | None = None
    # Their length is the calendar's to refuse, as it refuses the same text inside `spec`.
    cron: str | None = None
    timezone: str | None = None
    action: ActionIn | None = None
    workflow: str | None = Field(default=None, min_length=1, max_length=128)
    activation_id: str | None = Field(default=None, min_length=1, max_length=36)
    input: Any = None
    overlap_policy: OverlapPolicy | None = None
    missed_policy: MissedPolicy | None = None
    jitter_seconds: int | None = Field(default=None, ge=0, le=3600)
    max_runs: int | None = Field(default=None, ge=1, le=MAX_RUNS_LIMIT)
    labels: dict[str, str] | None = Field(
        default=None, json_schema_extra=keyed_strings(MAX_LABELS, MAX_LABEL_VALUE)
    )
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_SEARCH_ATTRIBUTES,
        json_schema_extra=keyed_strings(MAX_SEARCH_ATTRIBUTES),
    )
    notes: str | None = Field(default=None, max_length=4096)


class SchedulePatchIn(ScheduleIn):
    """A JSON merge patch (RFC 7386) of a save request: `null` removes a field or a label."""

    labels: dict[str, str | None] | None = Field(  # type: ignore[assignment]
        default=None, json_schema_extra=keyed_strings(MAX_LABELS, MAX_LABEL_VALUE, patch=True)
    )
    search_attributes: dict[str, str | None] | None = Field(  # type: ignore[assignment]
        default=None,
        max_length=MAX_SEARCH_ATTRIBUTES,
        json_schema_extra=keyed_strings(MAX_SEARCH_ATTRIBUTES),
    )


class ReasonIn(Strict):
    reason: str | None = Field(default=None, max_length=MAX_REASON)


class TriggerIn(ReasonIn):
    overlap_policy: OverlapPolicy | None = None


class BackfillIn(ReasonIn):
    from_: str = Field(alias="from", max_length=64)
    to: str = Field(max_length=64)
    overlap_policy: OverlapPolicy | None = None
