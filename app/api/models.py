"""Request bodies of the foundation routes (pydantic v2, unknown fields refused)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.schedules.config import LABEL_KEY


def keyed_strings(
    entries: int, longest: int | None = None, *, patch: bool = False
) -> dict[str, Any]:
    """The published bounds of labels or search attributes, which their own checks apply: at
    most `entries` keys of the labels' key rule, each value at most `longest` characters.

    Set beside the field's type, so for an optional field they bind only when it is an object;
    in a merge `patch` a value may also be `null` (remove this key)."""
    bounds: dict[str, Any] = {
        "maxProperties": entries,
        "propertyNames": {"pattern": f"^{LABEL_KEY.pattern}$"},
    }
    if longest is not None:
        value = {"type": "string", "maxLength": longest}
        bounds["additionalProperties"] = {"anyOf": [value, {"type": "null"}]} if patch else value
    return bounds


class Strict(BaseModel):
    """Unknown fields refused, and no coercion: `true` or `"7"` is not an integer, `1` is not a
    boolean (the types the OpenAPI document declares are the types accepted)."""

    model_config = ConfigDict(extra="forbid", str_max_length=4096, strict=True)


class NothingIn(Strict):
    """The body of an operation that takes no fields: empty, or `{}`."""


class NamespaceIn(Strict):
    name: str = Field(min_length=1, max_length=64)
    # An Integer column: a larger limit would not fit (and no namespace needs it).
    max_active_runs: int | None = Field(default=None, ge=1, le=2**31 - 1)


class PreviewIn(Strict):
    """A spec, or the `cron` and `timezone` shorthands a save accepts; `schedule_id` names the
    schedule it would be saved as (its jitter, and its cursor when the calendar fires alike)."""

    spec: dict[str, Any] | None = None
    cron: str | None = None
    timezone: str | None = None
    after: str | None = Field(default=None, max_length=64)
    count: int = Field(default=10, ge=1, le=100)
    jitter_seconds: int | None = Field(default=0, ge=0, le=3600)
    schedule_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")


class ClockIn(Strict):
    now: str = Field(max_length=64)
    tick: bool = False
    work: bool = False


class TickIn(Strict):
    work: bool = False
