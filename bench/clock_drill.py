"""Drill: the manual clock moved back an hour while schedules fire under load; nothing fires twice.

Run: .venv/bin/python bench/clock_drill.py [--cron 200] [--intervals 50] [--pace 20]
     [--web 2] [--schedulers 2] [--workers 2] [--reads 10] [--postgres URL]

The processes of `bench/soak.py` (gunicorn as `almanac_app`, `scheduler run` as
`almanac_scheduler`, `worker` processes, the read load) run on a fresh PostgreSQL database with
the manual clock (`ALMANAC_CLOCK=manual`, test-only), which every process reads from the
database. The drill moves it with `POST /api/v1/admin/clock` (no tick: the schedulers' own
ticks fire) `--pace` simulated seconds per real second:

  A. from T0 (the top of the current hour) forward 65 simulated minutes: every schedule fires
     on every occurrence;
  B. back one hour (T1 - 1 h, inside the hour A already fired) and forward `--back-minutes`
     (30) from there: nothing may fire, since every schedule's cursor is past the clock;
  C. straight to T1 again and forward 2 more minutes: firing resumes where A stopped.

Reported: runs and ledger rows created during B (must be 0); occurrences due in A's and C's
whole minutes against the ledger (lost: must be 0); doubles (ledger rows sharing a schedule and
instant) and overlapping ledger rows (an occurrence accounted twice, e.g. started again inside a
range already fired or skipped); runs per schedule against its started ledger rows; 5xx;
processes that exited.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from save_bench import TOKEN  # noqa: E402
from soak import OVERLAPS, PG_DEFAULT, Soak, ledger_in_window  # noqa: E402

from app.db import normalize_url  # noqa: E402


class ClockDrill(Soak):
    """The soak's processes on the manual clock, whose time the drill moves."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.t0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        self.base = ""

    def env(self, url: str) -> dict[str, str]:
        return super().env(url) | {"ALMANAC_CLOCK": "manual", "ALMANAC_TESTING": "1"}

    def seed(self, base: str) -> None:
        self.base = base
        self.set_clock(self.t0)  # the schedules are saved at T0, so their cursors start there
        super().seed(base)

    def set_clock(self, instant: datetime) -> None:
        response = requests.post(
            self.base + "/api/v1/admin/clock",
            json={"now": instant.strftime("%Y-%m-%dT%H:%M:%SZ")},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        response.raise_for_status()

    def walk(self, start: datetime, minutes: float) -> datetime:
        """Move the clock from `start` forward `minutes`, `--pace` seconds per real second."""
        instant, end = start, start + timedelta(minutes=minutes)
        while instant < end:
            began = time.monotonic()
            self.set_clock(instant)
            instant += timedelta(seconds=self.args.pace)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        self.set_clock(end)
        return end

    def counts(self) -> tuple[int, int]:
        engine = create_engine(normalize_url(self.owner))
        with engine.connect() as conn:
            runs = int(conn.scalar(text("SELECT count(*) FROM runs")))
            ledger = int(conn.scalar(text("SELECT count(*) FROM schedule_occurrences")))
        engine.dispose()
        return runs, ledger

    def check(self, windows: list[tuple[datetime, datetime]], during_back: tuple[int, int]) -> None:
        engine = create_engine(normalize_url(self.owner))
        with engine.connect() as conn:
            doubles = conn.scalar(
                text(
                    "SELECT count(*) FROM (SELECT schedule_pk, instant FROM schedule_occurrences "
                    "WHERE kind <> 'skipped' GROUP BY 1, 2 HAVING count(*) > 1) d"
                )
            )
            overlaps = conn.scalar(text(OVERLAPS))
            mismatched = conn.scalar(
                text(
                    "SELECT count(*) FROM schedules s WHERE (SELECT count(*) FROM runs r "
                    "WHERE r.schedule_id = s.schedule_id) <> (SELECT count(*) FROM "
                    "schedule_occurrences o WHERE o.schedule_pk = s.id AND o.kind = 'started')"
                )
            )
            lines = []
            for start, end in windows:
                accounted, skipped, reasons = ledger_in_window(conn, start, end)
                seconds = (end - start).total_seconds()
                expected = int(self.args.cron * seconds // 60 + self.args.intervals * seconds // 30)
                lines.append(
                    f"  {start:%H:%M}–{end:%H:%M} (simulated): {expected} due, "
                    f"{accounted} accounted ({skipped} skipped {reasons or ''}), "
                    f"lost {expected - accounted}"
                )
        engine.dispose()
        runs, ledger = during_back
        print(f"  during B (clock an hour back): {runs} runs and {ledger} ledger rows created")
        print("\n".join(lines))
        print(f"  doubles {doubles}, overlapping ledger rows {overlaps}")
        print(f"  schedules whose runs differ from their started ledger rows: {mismatched}")
        errors = sum(n for status, n in self.statuses.items() if status >= 500)
        print(f"  reads: {sum(self.statuses.values())} answers {dict(self.statuses)}, 5xx {errors}")
        exited = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
        print(f"  processes that exited by themselves: {exited or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cron", type=int, default=200)
    parser.add_argument("--intervals", type=int, default=50)
    parser.add_argument("--pace", type=float, default=20, help="simulated seconds per second")
    parser.add_argument("--back-minutes", type=float, default=30)
    parser.add_argument("--web", type=int, default=2)
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reads", type=float, default=10)
    parser.add_argument("--logs", help="directory for each process's output (default /tmp/<db>)")
    parser.add_argument(
        "--postgres", default=os.environ.get("ALMANAC_TEST_POSTGRES_URL", PG_DEFAULT)
    )
    args = parser.parse_args()
    drill = ClockDrill(args)
    load: threading.Thread | None = None
    try:
        base = drill.setup()
        load = threading.Thread(target=drill.load, args=(base,))
        load.start()
        t0 = drill.t0
        print(f"A: {t0:%H:%M} forward 65 min at {args.pace:g}x (logs in {drill.logs})", flush=True)
        t1 = drill.walk(t0, 65)
        time.sleep(5)  # the last ticks at T1 commit
        back = t1 - timedelta(hours=1)
        print(f"B: back to {back:%H:%M}, forward {args.back_minutes:g} min", flush=True)
        drill.set_clock(back)
        time.sleep(3)  # a tick that read T1 before the move may still commit
        before = drill.counts()
        drill.walk(back, args.back_minutes)
        time.sleep(3)
        after = drill.counts()
        print(f"C: to {t1:%H:%M} again, forward 2 min", flush=True)
        end = drill.walk(t1, 2)
        time.sleep(5)
        # Whole simulated minutes: A after its first minute, and C's minutes before its end.
        windows = [(t0 + timedelta(minutes=1), t1.replace(second=0)), (t1, end)]
        drill.check(windows, (after[0] - before[0], after[1] - before[1]))
    finally:
        drill.stop.set()
        if load is not None:
            load.join()
        drill.close()


if __name__ == "__main__":
    main()
