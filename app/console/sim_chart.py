"""Geometry of the simulation timeline: what a schedule would do, on three rows over the window.

Started runs are bars from their start to their end (cut at the window's end), buffered
occurrences are marks at their due time with a bar once the buffer lets them start, skipped ones
are marks at their due time. Classes only, so the strict content security policy holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.schedules.simulate import Item

WIDTH = 960
LABEL = 90
PAD_RIGHT = 16
ROWS = ("started", "buffered", "skipped")
ROW = 28
TOP = 24
MIN_BAR = 2.0


@dataclass(frozen=True)
class Shape:
    item: Item
    x: float
    y: float
    width: float  # 0 for a mark
    css: str


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class SimChart:
    shapes: list[Shape]
    ticks: list[Tick]
    rows: list[tuple[str, float]]
    width: int = WIDTH
    height: int = TOP + ROW * len(ROWS) + 6


def _ticks(begin: datetime, end: datetime, x_of: Callable[[datetime], float]) -> list[Tick]:
    """Every 3 hours over a day, every day over a week (UTC)."""
    step = timedelta(hours=3) if end - begin <= timedelta(days=1) else timedelta(days=1)
    fmt = "%H:%M" if step < timedelta(days=1) else "%a %d"
    at = begin.replace(minute=0, second=0, microsecond=0)
    if step >= timedelta(days=1):
        at = at.replace(hour=0)
    ticks = []
    while at < end:
        if at >= begin:
            ticks.append(Tick(x_of(at), at.strftime(fmt)))
        at += step
    return ticks


def sim_chart(items: list[Item], begin: datetime, end: datetime) -> SimChart:
    plot = WIDTH - LABEL - PAD_RIGHT
    span = (end - begin).total_seconds()

    def x_of(at: datetime) -> float:
        clamped = min(max(at, begin), end)
        return LABEL + plot * (clamped - begin).total_seconds() / span

    def y_of(row: str) -> float:
        return TOP + ROW * ROWS.index(row)

    shapes = []
    for item in items:
        mark_row = "skipped" if item.outcome == "skipped" else item.outcome
        if item.outcome != "started":
            shapes.append(Shape(item, x_of(item.due_at), y_of(mark_row), 0.0, "mark-" + mark_row))
        if item.starts_at is not None:
            x = x_of(item.starts_at)
            width = max(x_of(item.ends_at or end) - x, MIN_BAR)
            shapes.append(Shape(item, x, y_of("started"), width, "run-" + item.outcome))
    rows = [(row, y_of(row)) for row in ROWS]
    return SimChart(shapes, _ticks(begin, end, x_of), rows)
