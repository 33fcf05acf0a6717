"""Geometry for the server-rendered SVG charts: upcoming fires and namespace load."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 960
HEIGHT = 160
PAD = 28


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    start: datetime
    count: int
    busiest: bool


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class LoadChart:
    """Runs starting per bucket; the busiest are flagged so operators see where to jitter."""

    bars: list[Bar]
    ticks: list[Tick]
    peak: int
    total: int
    width: int = WIDTH
    height: int = HEIGHT
    bucket_minutes: int = 5


def _x(at: datetime, start: datetime, span: timedelta) -> float:
    return PAD + (WIDTH - 2 * PAD) * ((at - start) / span)


def _hour_ticks(start: datetime, span: timedelta, every_hours: int) -> list[Tick]:
    first = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    ticks, at = [], first
    while at < start + span:
        if at.hour % every_hours == 0:
            ticks.append(Tick(_x(at, start, span), at.strftime("%H:%M")))
        at += timedelta(hours=1)
    return ticks


def load_chart(
    starts: Iterable[datetime],
    now: datetime,
    hours: int = 24,
    bucket_minutes: int = 5,
    weighted: Iterable[tuple[datetime, int]] = (),
) -> LoadChart:
    """Bucket `starts` (and `weighted` (start, how many) pairs) into `bucket_minutes` slots
    over the next `hours` after `now`."""
    span = timedelta(hours=hours)
    size = timedelta(minutes=bucket_minutes)
    slots = int(span / size)
    counts = [0] * slots
    for at in starts:
        index = int((at - now) / size)
        if 0 <= index < slots:
            counts[index] += 1
    for at, many in weighted:
        index = int((at - now) / size)
        if 0 <= index < slots:
            counts[index] += many
    peak = max(counts, default=0)
    # The top 5% of non-empty slots (at least the single busiest) are highlighted.
    nonzero = sorted((c for c in counts if c), reverse=True)
    threshold = nonzero[max(0, len(nonzero) // 20 - 1)] if nonzero else 1
    slot_width = (WIDTH - 2 * PAD) / slots
    plot = HEIGHT - 2 * PAD
    bars = [
        Bar(
            PAD + i * slot_width,
            HEIGHT - PAD - (plot * c / peak if peak else 0),
            max(slot_width - 0.5, 0.5),
            plot * c / peak if peak else 0,
            now + i * size,
            c,
            c >= threshold and c > 0,
        )
        for i, c in enumerate(counts)
    ]
    return LoadChart(
        bars, _hour_ticks(now, span, 3), peak, sum(counts), bucket_minutes=bucket_minutes
    )


@dataclass(frozen=True)
class Mark:
    x: float
    at: datetime
    note: str | None


@dataclass(frozen=True)
class Timeline:
    marks: list[Mark]
    ticks: list[Tick]
    start: datetime
    end: datetime
    width: int = WIDTH
    height: int = 70


def timeline(dues: Iterable[tuple[datetime, str | None]], now: datetime, end: datetime) -> Timeline:
    """Place each upcoming due time (with its DST note) on a line from `now` to `end`."""
    span = max(end - now, timedelta(minutes=1))
    marks = [Mark(_x(at, now, span), at, note) for at, note in dues if now <= at <= end]
    hours = span / timedelta(hours=1)
    every = 1 if hours <= 12 else 3 if hours <= 48 else 24
    ticks = _hour_ticks(now, span, every) if hours <= 24 * 14 else []
    return Timeline(marks, ticks, now, end)
