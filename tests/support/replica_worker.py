"""One replica for tests/ticker/test_replicas.py: ticks the schedule phases until SIGTERM.

Run: python tests/support/replica_worker.py DATABASE_URL [PAGE_SIZE]

It builds the app with the manual clock shared through the database and runs the schedule
phases of the tick (drain buffers, fire due schedules) back to back, as a scheduler process
would, printing "ready" once.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app import create_app  # noqa: E402
from app.context import clock, ticker_database  # noqa: E402
from app.schedules.tick import due  # noqa: E402
from app.ticker import rotation  # noqa: E402
from app.ticker import schedules as phases  # noqa: E402
from app.ticker.types import TickContext, TickResult  # noqa: E402


def main() -> None:
    url = sys.argv[1]
    if len(sys.argv) > 2:
        due.PAGE_SIZE = int(sys.argv[2])
    app = create_app(
        {
            "TESTING": True,
            "DATABASE_URL": url,
            "CLOCK": "manual",
            "SCHEDULER": "off",
            "SECRET_KEY": "replica",
            # The URL given is the login to tick as (the scheduler's on PostgreSQL).
            "SCHEDULER_DATABASE_URL": None,
        }
    )
    # The scheduler login (from the environment) on PostgreSQL, namespace by namespace.
    db = ticker_database(app)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("ready", flush=True)
    while not stopping:
        with db.session() as session:
            now = clock(app).now(session)
        ctx = TickContext(db, now, app.config, TickResult(now), time.monotonic() + 5)
        if db.is_sqlite:
            phases.drain_buffers(ctx)
            phases.fire_due_schedules(ctx)
        else:
            rotation.run_bound(ctx, [phases.drain_buffers, phases.fire_due_schedules], None)
        if not ctx.result.rows:
            time.sleep(0.01)
    db.dispose()


if __name__ == "__main__":
    main()
