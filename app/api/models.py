"""Request bodies of the foundation routes (pydantic v2, unknown fields refused)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Unknown fields refused, and no coercion: `true` or `"7"` is not an integer, `1` is not a
    boolean (the types the OpenAPI document declares are the types accepted)."""

    model_config = ConfigDict(extra="forbid", str_max_length=4096, strict=True)


class NamespaceIn(Strict):
    name: str = Field(min_length=1, max_length=64)
    # An Integer column: a larger limit would not fit (and no namespace needs it).
    max_active_runs: int | None = Field(default=None, ge=1, le=2**31 - 1)


class PreviewIn(Strict):
    """A spec, or the `cron` and `timezone` shorthands a save accepts."""

    spec: dict[str, Any] | None = None
    cron: str | None = Field(default=None, max_length=256)
    timezone: str | None = Field(default=None, max_length=64)
    after: str | None = Field(default=None, max_length=64)
    count: int = Field(default=10, ge=1, le=100)
    jitter_seconds: int = Field(default=0, ge=0, le=3600)


class ClockIn(Strict):
    now: str = Field(max_length=64)
    tick: bool = False
    work: bool = False


class TickIn(Strict):
    work: bool = False
