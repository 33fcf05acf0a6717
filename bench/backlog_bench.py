"""Benchmark: how long one schedule's tick spends on a backlog (the ticker was down).

Run: .venv/bin/python bench/backlog_bench.py [--days 1] [--rounds 3]

A schedule whose ticker was down for `--days` has every canonical occurrence of that time after
its cursor; the tick's `scan_due` accounts for them to count the one skipped range and find the
occurrence still within its grace. Prints the best of `--rounds` per case: a one-second interval
(counted by arithmetic, so the time does not grow with it), a one-second interval beside an
hourly cron line and two cron lines beside a 30-second interval (unions: the intervals counted by
arithmetic, the cron lines a day at a time, their shared instants once per day's pattern), and a
union of two intervals whose common period holds 259,201 instants (by inclusion-exclusion), and a
minutely cron (counted a day at a time), without and with jitter (with jitter, each walked
occurrence's due time is computed).
docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.calendar import Spec  # noqa: E402
from app.schedules.tick.policy import scan_due  # noqa: E402

CASES = {
    "PT1S interval": {"intervals": [{"every": "PT1S"}]},
    "PT1S interval + cron": {"intervals": [{"every": "PT1S"}], "cron_expressions": ["0 * * * *"]},
    "* * * * * + 0 * * * * + PT30S": {
        "intervals": [{"every": "PT30S"}],
        "cron_expressions": ["* * * * *", "0 * * * *"],
    },
    "PT1S + P3D intervals": {"intervals": [{"every": "PT1S"}, {"every": "P3D"}]},
    "* * * * * cron": {"cron_expressions": ["* * * * *"]},
}


def best_of(rounds: int, spec: Spec, jitter: int, days: float) -> tuple[float, int]:
    cursor = datetime(2026, 11, 1, tzinfo=UTC)
    now = cursor + timedelta(days=days)
    best, count = float("inf"), 0
    for _ in range(rounds):
        started = time.perf_counter()
        count = scan_due(spec, "bench-uid", jitter, cursor, now).count
        best = min(best, time.perf_counter() - started)
    return best, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"# backlog scan, {args.days:g} day(s) of ticker outage, {platform.python_version()}")
    for name, spec in CASES.items():
        for jitter in (0, 30):
            seconds, count = best_of(args.rounds, Spec.from_dict(spec), jitter, args.days)
            rate = count / seconds
            print(
                f"{name}, jitter {jitter:>2} s: {count:,} occurrences in "
                f"{seconds * 1000:,.3f} ms ({rate:,.0f}/s)"
            )


if __name__ == "__main__":
    main()
