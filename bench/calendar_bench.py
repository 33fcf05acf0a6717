"""Benchmark: Almanac's next occurrence against raw croniter on the same 10,000 calendars.

Run: .venv/bin/python bench/calendar_bench.py [--count 10000] [--seed 20260308]

Ours (cold) = validate_calendar + Spec construction + next_occurrence on expressions never seen
before (caches cleared); ours (warm) = the same calls again, as the ticker makes them all day.
Raw croniter = croniter(expr, start_in_zone).get_next(datetime), which neither validates strictly
nor applies Almanac's DST rules.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from croniter import croniter  # noqa: E402

from app.calendar import Spec, next_occurrence, validate_calendar  # noqa: E402
from app.calendar.grammar import parse_calendar  # noqa: E402

ZONES = (
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Australia/Sydney",
    "Pacific/Auckland",
    "America/Santiago",
    "Asia/Tokyo",
)
FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))

Case = tuple[str, str, datetime]


def random_field(rng: random.Random, low: int, high: int) -> str:
    """One field in one of the forms the grammar allows (docs/calendar.md)."""
    form = rng.choice(("*", "number", "list", "range", "range_step", "star_step"))
    if form == "*":
        return "*"
    if form == "number":
        return str(rng.randint(low, high))
    if form == "list":
        return ",".join(str(v) for v in sorted(rng.sample(range(low, high + 1), rng.randint(2, 4))))
    a, b = sorted(rng.sample(range(low, high + 1), 2))
    if form == "range":
        return f"{a}-{b}"
    step = rng.randint(2, max(2, (high - low) // 3))
    return f"{a}-{b}/{step}" if form == "range_step" else f"*/{step}"


def random_expression(rng: random.Random) -> str:
    fields = [random_field(rng, low, high) for low, high in FIELDS]
    # Day of month and day of week may not both be restricted; mostly leave the day fields open.
    fields[2 + rng.randint(0, 1) * 2] = "*"
    if rng.random() < 0.6:
        fields[3] = "*"
    return " ".join(fields)


def make_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    expressions: dict[str, None] = {}
    while len(expressions) < count:
        expr = random_expression(rng)
        try:
            validate_calendar(expr)
        except ValueError:
            continue
        expressions[expr] = None
    start = datetime(2020, 1, 1, tzinfo=UTC)
    span = int(timedelta(days=365 * 15).total_seconds())
    return [
        (expr, rng.choice(ZONES), start + timedelta(seconds=rng.randrange(span)))
        for expr in expressions
    ]


def ours(case: Case) -> datetime | None:
    expr, zone, start = case
    validate_calendar(expr)
    return next_occurrence(Spec(cron_expressions=(expr,), timezone=zone), start)


def raw_croniter(case: Case) -> datetime:
    expr, zone, start = case
    result: datetime = croniter(expr, start.astimezone(ZoneInfo(zone))).get_next(datetime)
    return result


def measure(function: Callable[[Case], object], cases: list[Case]) -> tuple[float, list[object]]:
    began = time.perf_counter()
    results = [function(case) for case in cases]
    return (time.perf_counter() - began) / len(cases) * 1e6, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20260308)
    args = parser.parse_args()
    cases = make_cases(args.count, args.seed)
    parse_calendar.cache_clear()
    cold, our_results = measure(ours, cases)
    warm, _ = measure(ours, cases)
    raw, raw_results = measure(raw_croniter, cases)
    # Compare in UTC: aware datetimes in a DST fold never compare equal across zones (PEP 495).
    differ = sum(
        1
        for mine, theirs in zip(our_results, raw_results, strict=True)
        if mine != theirs.astimezone(UTC)  # type: ignore[attr-defined]
    )
    print(
        f"machine: {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}"
    )
    print(
        f"calendars: {len(cases)} distinct expressions over {len(ZONES)} zones (seed {args.seed})"
    )
    print(f"ours, cold (validate + Spec + next_occurrence): {cold:8.1f} us/call")
    print(f"ours, warm (same calls, parse cached):          {warm:8.1f} us/call")
    print(f"raw croniter get_next:                          {raw:8.1f} us/call")
    print(f"ratio ours cold / croniter: {cold / raw:.2f}  (target <= 2.00)")
    print(f"ratio ours warm / croniter: {warm / raw:.2f}")
    print(f"results differing from croniter: {differ} (expected only where a DST fold repeats)")


if __name__ == "__main__":
    main()
