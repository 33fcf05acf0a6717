"""Geometry of the overview's stacked bar chart: runs per hour, one segment per outcome."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.runs.overview import OUTCOMES, HourCounts

WIDTH = 960
HEIGHT = 180
PAD_X = 36
PAD_TOP = 16
PAD_BOTTOM = 28


@dataclass(frozen=True)
class Segment:
    """One outcome's part of an hour's bar; `css` is its class (colours live in app.css)."""

    x: float
    y: float
    width: float
    height: float
    outcome: str
    count: int
    css: str


@dataclass(frozen=True)
class HourBar:
    start: datetime
    total: int
    segments: list[Segment]
    label_x: float
    labelled: bool


@dataclass(frozen=True)
class OutcomeChart:
    bars: list[HourBar]
    totals: dict[str, int]
    peak: int
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    @property
    def baseline(self) -> int:
        return HEIGHT - PAD_BOTTOM


def css_class(outcome: str) -> str:
    return "outcome-" + outcome.replace(" ", "-")


def outcome_chart(hours: Sequence[HourCounts]) -> OutcomeChart:
    """Stack each hour's outcomes bottom-up in `OUTCOMES` order, scaled to the busiest hour."""
    peak = max((hour.total for hour in hours), default=0)
    slot = (WIDTH - 2 * PAD_X) / max(len(hours), 1)
    plot = HEIGHT - PAD_TOP - PAD_BOTTOM
    bars = []
    for index, hour in enumerate(hours):
        x = PAD_X + index * slot
        top = float(HEIGHT - PAD_BOTTOM)
        segments = []
        for outcome in OUTCOMES:
            count = hour.counts.get(outcome, 0)
            if not count:
                continue
            height = plot * count / peak
            top -= height
            segments.append(
                Segment(x + 1, top, slot - 2, height, outcome, count, css_class(outcome))
            )
        bars.append(HourBar(hour.start, hour.total, segments, x + slot / 2, index % 3 == 0))
    totals = {outcome: sum(hour.counts.get(outcome, 0) for hour in hours) for outcome in OUTCOMES}
    return OutcomeChart(bars, totals, peak)
