"""Request and response bodies of the simulation routes (docs/schedules.md, "Simulation")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.api.models import Strict
from app.api.schedule_models import ScheduleIn


class WindowIn(Strict):
    """The window [from, to) and the assumed length of every run (ISO-8601, default PT0S)."""

    from_: str = Field(alias="from", max_length=64)
    to: str = Field(max_length=64)
    run_duration: str | None = Field(default=None, max_length=64)


class SimulateScheduleIn(ScheduleIn):
    """A save request (id optional) plus the window to simulate it over."""

    from_: str = Field(alias="from", max_length=64)
    to: str = Field(max_length=64)
    run_duration: str | None = Field(default=None, max_length=64)


class SimulatedItemOut(BaseModel):
    occurrence_time: str
    due_at: str
    outcome: Literal["started", "skipped", "buffered"]
    reason: str | None
    run_id: str | None
    starts_at: str | None
    ends_at: str | None
    ends_runs: list[str]


class SimulationSummaryOut(BaseModel):
    started: int
    skipped: int
    buffered: int
    max_concurrent: int


class SimulationOut(BaseModel):
    """At most 1000 occurrences, oldest first; `truncated` when the window held more."""

    items: list[SimulatedItemOut]
    summary: SimulationSummaryOut
    truncated: bool
