"""Geometry for the server-rendered SVG charts: upcoming fires and namespace load."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import chain

WIDTH = 960
HEIGHT = 160
PAD = 28
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The upcoming-fires strip sits in a card about 360 px wide: its units are close to pixels, so
# its labels read at their own size (a 960-unit strip there drew them 4 px tall).
TIMELINE_WIDTH = 400
TIMELINE_TICKS = 7


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


def _x(at: datetime, start: datetime, span: timedelta, width: int = WIDTH) -> float:
    return PAD + (width - 2 * PAD) * ((at - start) / span)


def _hour_ticks(
    start: datetime, span: timedelta, every_hours: int, width: int = WIDTH, label: str = "%H:%M"
) -> list[Tick]:
    first = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    ticks, at = [], first
    while at < start + span:
        if at.hour % every_hours == 0:
            ticks.append(Tick(_x(at, start, span, width), at.strftime(label)))
        at += timedelta(hours=1)
    return ticks


def slot_start(at: datetime, size: timedelta) -> datetime:
    """The start of `at`'s slot on the UTC clock (14:27 is in 14:25 for 5 minutes), so a slot's
    count does not change as the minutes pass, only as starts enter and leave the window."""
    return at - (at - EPOCH) % size


def load_chart(
    starts: Iterable[datetime],
    now: datetime,
    hours: int = 24,
    bucket_minutes: int = 5,
    weighted: Iterable[tuple[datetime, int]] = (),
) -> LoadChart:
    """Count `starts` (and `weighted` (start, how many) pairs) in the next `hours` after `now`
    per `bucket_minutes` slot of the clock; the window cuts the first and the last slot."""
    size = timedelta(minutes=bucket_minutes)
    end = now + timedelta(hours=hours)
    origin = slot_start(now, size)
    slots = (end - origin) // size + 1
    counts = [0] * slots
    for at, many in chain(((at, 1) for at in starts), weighted):
        if now <= at <= end:
            counts[(at - origin) // size] += many
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
            origin + i * size,
            c,
            c >= threshold and c > 0,
        )
        for i, c in enumerate(counts)
    ]
    ticks = _hour_ticks(origin, slots * size, 3)
    return LoadChart(bars, ticks, peak, sum(counts), bucket_minutes=bucket_minutes)


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
    width: int = TIMELINE_WIDTH
    height: int = 70


def timeline(dues: Iterable[tuple[datetime, str | None]], now: datetime, end: datetime) -> Timeline:
    """Place each upcoming due time (with its DST note) on a line from the first of them to
    `end`: a schedule that starts months from now spreads its marks over the strip instead of
    piling them at its right end."""
    shown = [(at, note) for at, note in dues if now <= at <= end]
    start = min((at for at, _ in shown), default=now)
    span = max(end - start, timedelta(minutes=1))
    marks = [Mark(_x(at, start, span, TIMELINE_WIDTH), at, note) for at, note in shown]
    return Timeline(marks, _timeline_ticks(start, span), start, start + span)


# Days between date labels, the fewest that keep at most `TIMELINE_TICKS` of them.
DAY_STEPS = (1, 2, 3, 7, 14, 28, 56, 91, 182, 364)


def _timeline_ticks(start: datetime, span: timedelta) -> list[Tick]:
    """At most `TIMELINE_TICKS` hour labels, or date labels (at UTC midnights, every few days)
    once they are a day apart, so they stay apart on the narrow strip."""
    hours = span / timedelta(hours=1)
    for every in (1, 2, 3, 6, 12):
        if hours / every <= TIMELINE_TICKS:
            return _hour_ticks(start, span, every, TIMELINE_WIDTH)
    days = span / timedelta(days=1)
    # A label with its year is twice as wide: half as many of them, and none so close to the
    # strip's left end that its first half is cut off.
    with_year = span > timedelta(days=300)
    label, most, margin = ("%Y-%m-%d", 4, 32.0) if with_year else ("%m-%d", TIMELINE_TICKS, 16.0)
    step = next((n for n in DAY_STEPS if days / n <= most), DAY_STEPS[-1])
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    ticks, at = [], midnight
    while at <= start + span:
        x = _x(at, start, span, TIMELINE_WIDTH)
        if x >= margin:
            ticks.append(Tick(x, at.strftime(label)))
        at += timedelta(days=step)
    return ticks[:most]
