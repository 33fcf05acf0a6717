"""Geometry of a run's Gantt chart: one bar per step on a shared time axis, lanes indented.

The chart is drawn by the server as SVG with classes only (colours live in app.css), so it needs
no script and passes the strict content security policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from app.runs.steps_view import RunSteps, StepRow

WIDTH = 960
LABEL = 220  # the step names' column
PAD_RIGHT = 16
TOP = 26  # the time ticks above the first row
ROW = 22
INDENT = 14
MIN_BAR = 3.0  # a step that took no time still shows
TICKS = 5  # at most, the run's start included
# Tick spacings (seconds): the first that fits puts the marks on round offsets.
STEPS = (
    *(0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 20, 30),
    *(60 * m for m in (1, 2, 5, 10, 15, 20, 30)),
    *(3600 * h for h in (1, 2, 3, 4, 6, 12)),
    *(86400 * d for d in (1, 2, 7, 14, 30, 60, 90, 180, 365)),
)


@dataclass(frozen=True)
class Bar:
    row: StepRow
    y: float
    x: float
    width: float
    label_x: float
    css: str
    lane_band: bool
    duration: timedelta


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Gantt:
    bars: list[Bar]
    ticks: list[Tick]
    height: int
    span: timedelta
    width: int = WIDTH
    label_width: int = LABEL


def short_duration(delta: timedelta) -> str:
    """`0 s`, `45 s`, `3 min 20 s`, `2 h 5 min`, `3 d 4 h`: two units at most."""
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def tick_label(seconds: float, span: float) -> str:
    """An offset from the run's start; tenths of a second when the whole run took seconds.

    Rounded to the whole second, unlike durations: a label names the place it is drawn at
    (`+4 s` at 3.75 s), where a truncated one sits visibly off its mark."""
    if span <= 10:
        return f"+{seconds:.1f} s"
    return "+" + short_duration(timedelta(seconds=round(seconds)))


def status_class(row: StepRow) -> str:
    return "step-" + row.status.replace(" ", "-")


def gantt(steps: RunSteps, now: datetime) -> Gantt | None:
    """Bars placed from the run's first event to its end (or `now` while it goes on)."""
    if steps.start is None or not steps.rows:
        return None
    end = steps.end or now
    span = max((end - steps.start).total_seconds(), 1.0)
    plot = WIDTH - LABEL - PAD_RIGHT

    def x_of(at: datetime) -> float:
        return LABEL + plot * (at - steps.start).total_seconds() / span  # type: ignore[operator]

    bars = []
    for index, row in enumerate(steps.rows):
        x = x_of(row.started_at)
        width = max(x_of(row.ended_at or end) - x, MIN_BAR)
        y = TOP + index * ROW
        label_x = 6 + INDENT * row.depth
        css, band = status_class(row), row.depth > 0
        bars.append(Bar(row, y, x, width, label_x, css, band, row.duration(end)))
    ticks = [Tick(LABEL + plot * at / span, tick_label(at, span)) for at in tick_offsets(span)]
    return Gantt(bars, ticks, TOP + ROW * len(bars) + 8, timedelta(seconds=span))


def tick_offsets(span: float) -> list[float]:
    """Where the axis is marked, in seconds from the run's start: every multiple of the first
    round spacing that needs at most `TICKS` marks (`+0`, `+30 min`, `+1 h`, `+1 h 30 min` for
    a run of 1 h 45 min, not the uneven quarters of its span)."""
    step = next((each for each in STEPS if span / each <= TICKS - 1), span / (TICKS - 1))
    count = int(span / step + 1e-9)
    return [round(step * index, 6) for index in range(count + 1)]
