"""Soak: every kind of process on one PostgreSQL, on the real clock, under read load.

Run: .venv/bin/python bench/soak.py [--minutes 10 | --long] [--cron 2000] [--intervals 500]
     [--web 4] [--schedulers 2] [--workers 2] [--reads 20] [--kill] [--restart-postgres]
     [--no-vacuum] [--logs DIR] [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

A fresh database is set up as in production (`db create-roles`, `db upgrade` as the owner).
`--web` gunicorn workers serve as `almanac_app`; `--schedulers` `scheduler run --workers 0`
processes tick as `almanac_scheduler`; `--workers` `worker` processes run steps as
`almanac_app`. `--cron` schedules on `* * * * *` and `--intervals` on `PT30S` start a one-step
(`noop`) workflow; a load generator reads the console and the API at `--reads` requests/s.

Reported: commit lag (when a run row first became visible to an outside observer polling every
0.05 s, minus its due time; ids it skipped over are asked for again, so late commits count)
and start lag (the run's `started_at`, set when a worker claimed its first step, minus due),
p50/p99/max, and the p99 of each due minute (a drift shows as the minutes go by; `*` marks a
minute whose first seconds met the vacuum stand-in), over the whole minutes from the first
that begins a full minute after the processes started (their first burst is a warm-up); doubles
(ledger rows sharing a schedule and instant);
lost occurrences (canonical occurrences due in the measured window with no ledger row);
ledger rows overlapping an earlier one of their schedule (an occurrence accounted twice);
with `--kill`, a scheduler and a worker are SIGKILLed halfway (and started again);
with `--restart-postgres`, the PostgreSQL cluster is restarted halfway and nothing else is
touched (`--cut-connections S` does the same to the soak's database alone, for S seconds):
`/health`'s answers over time, which processes exited, gunicorn workers replaced;
5xx answers; RSS per process (first sample after warm-up, last, max); PostgreSQL connections.

On a server whose autovacuum is off (this project's CI machine turns it off), the soak runs
`VACUUM (ANALYZE)` on its database every minute in its place, as production's autovacuum would
(`--no-vacuum` to see what happens without it); the report says so.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from save_bench import TOKEN, _flask, _free_port  # noqa: E402

from app.db import normalize_url  # noqa: E402

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
# Threads of the read load (each console reader signs in once).
READERS = 8
# How long an id skipped by the observer is asked for again before it counts as rolled back.
# How often the observer looks for new runs: a commit lag is at most this much late.
OBSERVE_SECONDS = 0.05
# How often the stand-in for autovacuum runs (autovacuum's default naptime).
VACUUM_SECONDS = 60
GAP_SECONDS = 120


# Ledger rows of one schedule whose instants overlap an earlier row's [instant, through]: an
# occurrence accounted twice (started twice, or started inside a skipped range).
OVERLAPS = """
SELECT count(*) FROM (
  SELECT instant, max(coalesce(through, instant)) OVER (
    PARTITION BY schedule_pk ORDER BY instant, id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
  ) AS covered FROM schedule_occurrences
) o WHERE instant <= covered
"""


# How many occurrences of each ledger row fall in [:s, :e): a skipped range may straddle the
# window's edges, so its `count` alone would over- or under-count. Occurrences of the soak's
# schedules are 60 s (`cron-*`) or 30 s (`every-*`) apart from the row's first instant.
IN_WINDOW = """
WITH rows AS (
  SELECT o.kind, o.reason, coalesce(o.through, o.instant) AS last, p.step,
         o.instant + make_interval(secs => p.step * ceil(greatest(0, extract(epoch FROM
           CAST(:s AS timestamptz) - o.instant)) / p.step)) AS lo
  FROM schedule_occurrences o JOIN (
    SELECT id, CASE WHEN schedule_id LIKE 'cron-%' THEN 60 ELSE 30 END AS step FROM schedules
  ) p ON p.id = o.schedule_pk
  WHERE o.instant < :e AND coalesce(o.through, o.instant) >= :s
)
SELECT kind, reason, sum(CASE WHEN lo > last OR lo >= :e THEN 0 ELSE
  least(floor(extract(epoch FROM last - lo) / step),
        ceil(extract(epoch FROM CAST(:e AS timestamptz) - lo) / step) - 1) + 1 END)
FROM rows GROUP BY kind, reason
"""


def ledger_in_window(conn: Any, start: datetime, end: datetime) -> tuple[int, int, dict[str, int]]:
    """Occurrences in [start, end) the ledger accounts for, how many skipped, skips by reason."""
    rows = conn.execute(text(IN_WINDOW), {"s": start, "e": end}).all()
    accounted = sum(int(n) for _, _, n in rows)
    reasons = {str(reason): int(n) for kind, reason, n in rows if kind == "skipped" and n}
    return accounted, sum(reasons.values()), reasons


def _quantiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values):.2f} s, p99 {p99:.2f} s, max {values[-1]:.2f} s"


# A minute's burst is marked when a vacuum ran in its first seconds (see `_by_minute`).
BURST_SECONDS = 5


def _by_minute(
    runs: list[Any],
    first_seen: dict[str, datetime],
    vacuums: Sequence[tuple[datetime, datetime]] = (),
) -> list[str]:
    """`HH:MM commit/start` p99 lags of the runs due in each minute, marked `*` when one of
    the `vacuums` (start, end) ran during the minute's first `BURST_SECONDS`."""
    minutes: dict[datetime, tuple[list[float], list[float]]] = {}
    for run_id, due, started in runs:
        commit, start = minutes.setdefault(due.replace(second=0, microsecond=0), ([], []))
        if run_id in first_seen:
            commit.append((first_seen[run_id] - due).total_seconds())
        if started is not None:
            start.append((started - due).total_seconds())

    def mark(minute: datetime) -> str:
        burst_end = minute + timedelta(seconds=BURST_SECONDS)
        return "*" if any(a < burst_end and b > minute for a, b in vacuums) else ""

    return [
        f"{minute:%H:%M}{mark(minute)} {_p99(commit):.2f}/{_p99(start):.2f}"
        for minute, (commit, start) in sorted(minutes.items())
    ]


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else float("nan")


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.name = f"soak_{uuid.uuid4().hex[:10]}"
        admin_url = make_url(normalize_url(args.postgres))
        self.owner = admin_url.set(database=self.name).render_as_string(hide_password=False)
        login = make_url(self.owner)
        self.app_url = login.set(username="almanac_app").render_as_string(hide_password=False)
        self.ticker_url = login.set(username="almanac_scheduler").render_as_string(
            hide_password=False
        )
        self.admin = create_engine(
            normalize_url(args.postgres), isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.rss: dict[str, list[int]] = {}
        self.connections: list[int] = []
        self.statuses: dict[int, int] = {}
        self.first_seen: dict[str, datetime] = {}
        self.health: list[tuple[datetime, int, str]] = []
        self.restarts: list[tuple[datetime, datetime]] = []
        self.answers: list[tuple[datetime, int]] = []
        self.web_pids: list[set[int]] = []
        self.read_seconds: list[float] = []
        self.failures: dict[str, int] = {}
        self.vacuums: list[tuple[datetime, datetime]] = []  # when each ran (UTC)
        self.retried = 0
        self.reads_began = self.reads_ended = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.logs = Path(args.logs or f"/tmp/{self.name}")

    def env(self, url: str) -> dict[str, str]:
        return {
            **os.environ,
            "ALMANAC_DATABASE_URL": url,
            "ALMANAC_MIGRATION_DATABASE_URL": self.owner,
            "ALMANAC_SCHEDULER": "off",
            "ALMANAC_SECRET_KEY": "soak",
            "ALMANAC_ADMIN_PASSWORD": "soak-password",
            "ALMANAC_ADMIN_TOKEN": TOKEN,
        }

    def setup(self) -> str:
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.name}"'))
        env = self.env(self.app_url)
        for command in (("db", "create-roles"), ("db", "upgrade"), ("admin", "bootstrap")):
            _flask(env, *command)
        port = _free_port()
        self.spawn(
            "web",
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers"]
            + [str(self.args.web), "--threads", "4", "wsgi:app"],
            env,
        )
        base = f"http://127.0.0.1:{port}"
        self.wait_ready(base)
        self.seed(base)
        flask = [sys.executable, "-m", "flask", "--app", "wsgi"]
        for index in range(self.args.schedulers):
            self.spawn(
                f"scheduler{index}",
                flask + ["scheduler", "run", "--workers", "0"],
                self.env(self.ticker_url),
            )
        for index in range(self.args.workers):
            self.spawn(f"worker{index}", flask + ["worker"], env)
        return base

    def spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = (self.logs / f"{name}.log").open("ab")
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        process.args_env = (command, env)  # type: ignore[attr-defined]
        self.processes[name] = process

    def kill_and_replace(self, names: list[str]) -> None:
        """SIGKILL these processes mid-work and start replacements (a crash and a supervisor)."""
        for name in names:
            process = self.processes[name]
            process.send_signal(signal.SIGKILL)
            process.wait()
            print(
                f"  killed {name} (pid {process.pid}) at {datetime.now(UTC):%H:%M:%S}", flush=True
            )
            self.spawn(name, *process.args_env)  # type: ignore[attr-defined]

    def wait_ready(self, base: str) -> None:
        for _ in range(600):
            try:
                requests.get(base + "/api/v1/health", timeout=10)
                return
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError("the web processes did not answer")

    def seed(self, base: str) -> None:
        """Two templates saved through the API, copied with SQL by the owner."""
        client = requests.Session()
        client.headers["Authorization"] = f"Bearer {TOKEN}"
        api = base + "/api/v1"
        definition = {"name": "flow", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
        assert client.post(api + "/workflows", json=definition).status_code == 201
        assert client.post(api + "/activations", json={"workflow": "flow"}).status_code == 201
        action = {"action": {"workflow": "flow"}, "overlap_policy": "allow_all"}
        templates = {
            "cron": ({"cron": "* * * * *"}, self.args.cron),
            "every": ({"spec": {"intervals": [{"every": "PT30S"}]}}, self.args.intervals),
        }
        engine = create_engine(normalize_url(self.owner))
        columns = ""
        with engine.begin() as conn:
            columns = ", ".join(
                c
                for c in conn.scalars(
                    text(
                        "SELECT column_name FROM information_schema.columns WHERE "
                        "table_name = 'schedules' AND column_name NOT IN ('id', 'uid', "
                        "'schedule_id')"
                    )
                )
            )
        for prefix, (spec, count) in templates.items():
            body = {"id": f"{prefix}-0"} | spec | action
            response = client.post(api + "/schedules", json=body)
            assert response.status_code == 201, response.text
            with engine.begin() as conn:
                conn.execute(
                    text(
                        f"INSERT INTO schedules (uid, schedule_id, {columns}) SELECT "
                        f"gen_random_uuid()::text, :prefix || '-' || g, {columns} "
                        "FROM schedules s, generate_series(1, :n) g WHERE s.schedule_id = :t"
                    ),
                    {"prefix": prefix, "n": count - 1, "t": f"{prefix}-0"},
                )
        engine.dispose()

    def observe(self) -> None:
        """Poll for new runs (commit lag), RSS and connections until stopped.

        Ids come from a sequence at insert time, but transactions commit in any order: a run
        with a lower id can become visible after one with a higher id. Ids skipped over stay
        "gaps" and are asked for again on every poll (for `GAP_SECONDS`), so a late commit is
        seen late instead of never (which would drop the slowest commits from the lag).
        Each row's time is `clock_timestamp()` read in the same statement that first saw it.
        """
        engine = create_engine(normalize_url(self.owner), pool_pre_ping=True)
        last_id, last_sample = 0, 0.0
        gaps: dict[int, float] = {}
        while not self.stop.is_set():
            sample = time.monotonic() - last_sample >= 10
            if sample:
                last_sample = time.monotonic()
                self.sample_rss()
            try:
                with engine.connect() as conn:
                    rows = conn.execute(
                        text(
                            "SELECT id, run_id, clock_timestamp() FROM runs "
                            "WHERE id > :last OR id = ANY(:gaps)"
                        ),
                        {"last": last_id, "gaps": list(gaps)},
                    ).all()
                    found = set()
                    for pk, run_id, seen in rows:
                        self.first_seen.setdefault(run_id, seen)
                        found.add(pk)
                    top = max(found, default=last_id)
                    now = time.monotonic()
                    for pk in range(last_id + 1, top):
                        if pk not in found:
                            gaps[pk] = now
                    for pk in found:
                        gaps.pop(pk, None)
                    for pk, since in list(gaps.items()):
                        if now - since > GAP_SECONDS:  # a rolled-back insert: never coming
                            del gaps[pk]
                    last_id = max(last_id, top)
                    if sample:
                        self.connections.append(
                            int(
                                conn.scalar(
                                    text(
                                        "SELECT count(*) FROM pg_stat_activity WHERE datname = :d"
                                    ),
                                    {"d": self.name},
                                )
                            )
                        )
            except OperationalError:  # the database is restarting (--restart-postgres)
                pass
            self.stop.wait(OBSERVE_SECONDS)
        engine.dispose()

    def stand_in_for_autovacuum(self) -> None:
        """When the server runs no autovacuum, do its work: `VACUUM (ANALYZE)` the soak's
        database every `VACUUM_SECONDS` (its naptime), throttled with autovacuum's default
        cost delay. Without it every schedule update leaves a dead row version that the due
        index keeps finding, and the tick slows down minute after minute, which production,
        with autovacuum on, never sees."""
        engine = create_engine(
            normalize_url(self.owner), isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        while not self.stop.wait(VACUUM_SECONDS):
            began = datetime.now(UTC)
            try:
                with engine.connect() as conn:
                    conn.execute(text("SET vacuum_cost_delay = '2ms'"))
                    conn.execute(text("VACUUM (ANALYZE)"))
                self.vacuums.append((began, datetime.now(UTC)))
            except OperationalError:  # the database is restarting (--restart-postgres)
                pass
        engine.dispose()

    def watch_health(self, base: str) -> None:
        """Poll `/health` every 0.2 s and keep each change of answer with its time."""
        client = requests.Session()
        last: tuple[int, str] | None = None
        while not self.stop.is_set():
            try:
                response = client.get(base + "/api/v1/health", timeout=5)
                answer = (response.status_code, str(response.json().get("database")))
            except (requests.RequestException, ValueError) as exc:
                answer = (599, type(exc).__name__)
            if answer != last:
                self.health.append((datetime.now(UTC), *answer))
                last = answer
            self.stop.wait(0.2)

    def cut_connections(self, seconds: float) -> None:
        """Refuse new connections to the soak's database for `seconds` and end every open one:
        to its processes this looks like a database restart, while the cluster's other
        databases are untouched (a drill that needs no cluster restart)."""
        began = datetime.now(UTC)
        with self.admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false'))
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :d AND pid <> pg_backend_pid()"
                ),
                {"d": self.name},
            )
        time.sleep(seconds)
        with self.admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true'))
        self.restarts.append((began, datetime.now(UTC)))
        print(f"  connections cut {began:%H:%M:%S.%f}–{datetime.now(UTC):%H:%M:%S.%f}")

    def restart_postgres(self) -> None:
        """Restart the whole PostgreSQL cluster (every process keeps running, untouched)."""
        version = sorted(os.listdir("/etc/postgresql"))[-1]
        began = datetime.now(UTC)
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
        )
        self.restarts.append((began, datetime.now(UTC)))
        print(f"  PostgreSQL restarted {began:%H:%M:%S.%f}–{datetime.now(UTC):%H:%M:%S.%f}")

    def sample_rss(self) -> None:
        for name, process in self.processes.items():
            pids = [process.pid]
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
            if children.exists():
                pids += [int(p) for p in children.read_text().split()]
            total = 0
            for pid in pids:
                status = Path(f"/proc/{pid}/status")
                if status.exists():
                    for line in status.read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            self.rss.setdefault(name, []).append(total // 1024)
            if name == "web":
                self.web_pids.append(set(pids[1:]))

    def load(self, base: str) -> None:
        """`--reads` requests a second: the API's schedule list and health, and the console.

        Open loop: `READERS` threads share the rate, so slow answers do not slow the load down
        (one thread waiting for each answer managed 3 reads/s at the full scale on a loaded
        machine). The rate reached and the answers' latency are reported.
        """
        self.reads_began = time.monotonic()
        readers = [
            threading.Thread(target=self._read, args=(base, index)) for index in range(READERS)
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        self.reads_ended = time.monotonic()

    def _read(self, base: str, index: int) -> None:
        client = requests.Session()
        client.headers["Authorization"] = f"Bearer {TOKEN}"
        console = requests.Session()
        form = console.get(base + "/login", timeout=30).text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
        credentials = {"username": "admin", "password": "soak-password"}
        console.post(
            base + "/login", data=credentials | {"csrf_token": csrf.group(1) if csrf else ""}
        )
        paths = [
            (client, "/api/v1/schedules?limit=50"),
            (client, "/api/v1/runs?limit=50"),
            (client, "/api/v1/health"),
            (console, "/ns/default/schedules"),
        ]
        period = READERS / self.args.reads
        due = time.monotonic() + period * index / READERS
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            session, path = paths[index % len(paths)]
            index += 1
            began = time.monotonic()
            try:
                try:
                    status = session.get(base + path, timeout=30).status_code
                except requests.ConnectionError:
                    # gunicorn closes a keep-alive connection idle for 2 s; one sent on it just
                    # as it closes gets no answer. Retry once on a new connection, as browsers
                    # do, and count it; a server that is really gone fails the retry too.
                    with self.lock:
                        self.retried += 1
                    status = session.get(base + path, timeout=30).status_code
            except requests.RequestException as exc:
                status = 599
                with self.lock:
                    reason = exc.__context__ or exc
                    name = f"{type(exc).__name__}: {str(reason)[:90]}"
                    self.failures[name] = self.failures.get(name, 0) + 1
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                self.read_seconds.append(time.monotonic() - began)
                if status >= 500:
                    self.answers.append((datetime.now(UTC), status))
            # Keep the rate; a reader more than a period behind starts again from now.
            due = max(due + period, time.monotonic() - period)

    def report(self, window: tuple[datetime, datetime]) -> None:
        engine = create_engine(normalize_url(self.owner), pool_pre_ping=True)
        start, end = window
        with engine.connect() as conn:
            runs = conn.execute(
                text(
                    "SELECT r.run_id, o.instant, r.started_at FROM runs r JOIN "
                    "schedule_occurrences o ON o.run_id = r.run_id WHERE o.kind = 'started' "
                    "AND o.instant >= :s AND o.instant < :e"
                ),
                {"s": start, "e": end},
            ).all()
            doubles = conn.scalar(
                text(
                    "SELECT count(*) FROM (SELECT schedule_pk, instant FROM schedule_occurrences "
                    "WHERE kind <> 'skipped' GROUP BY 1, 2 HAVING count(*) > 1) d"
                )
            )
            accounted, skipped, reasons = ledger_in_window(conn, start, end)
            overlaps = conn.scalar(text(OVERLAPS))
        engine.dispose()
        seconds = (end - start).total_seconds()
        expected = int(self.args.cron * seconds // 60 + self.args.intervals * seconds // 30)
        commit = [
            (self.first_seen[run_id] - due).total_seconds()
            for run_id, due, _ in runs
            if run_id in self.first_seen
        ]
        started = [(s - due).total_seconds() for _, due, s in runs if s is not None]
        print(f"window {start:%H:%M:%S}–{end:%H:%M:%S} UTC: {expected} occurrences due")
        print(f"  started {len(runs)}, skipped {skipped} {reasons or ''}, accounted {accounted}")
        print(
            f"  lost {expected - accounted}, doubles {doubles}, overlapping ledger rows {overlaps}"
        )
        print(f"  commit lag: {_quantiles(commit)} ({len(commit)} of {len(runs)} seen)")
        print(f"  start lag: {_quantiles(started)} ({len(started)} of {len(runs)} started)")
        print("  p99 commit / start lag by minute (does it drift as the tables grow?):")
        print("    " + ", ".join(_by_minute(runs, self.first_seen, self.vacuums)))
        if self.vacuums:
            print(f"    (* a vacuum ran in the minute's first {BURST_SECONDS} s, its burst)")
            took = [(end - began).total_seconds() for began, end in self.vacuums]
            print(
                f"  stood in for autovacuum (off on this server): {len(self.vacuums)} "
                f"VACUUM (ANALYZE) runs, {_quantiles(took)}"
            )
        errors = sum(n for status, n in self.statuses.items() if status >= 500)
        total = sum(self.statuses.values())
        rate = total / max(1e-9, (self.reads_ended or time.monotonic()) - self.reads_began)
        print(f"  reads: {total} answers {dict(self.statuses)}, 5xx {errors}")
        print(f"  reads retried once after their connection closed: {self.retried}")
        if self.failures:
            print("  reads without an answer (599), by error:")
            for name, count in sorted(self.failures.items()):
                print(f"    {count} × {name}")
        print(
            f"  reads: {rate:.1f}/s reached of {self.args.reads:g}/s asked, "
            f"latency {_quantiles(self.read_seconds)}"
        )
        for began, ended in self.restarts:
            down = next((t for t, status, _ in self.health if t >= began and status != 200), None)
            back = next(
                (t for t, status, _ in self.health if down and t > down and status == 200), None
            )
            during = [(t, status) for t, status in self.answers if began <= t <= (back or ended)]
            print(
                f"  outage {began:%H:%M:%S.%f}–{ended:%H:%M:%S.%f}: {len(during)} of the 5xx "
                f"fell between the outage's start and /health's first 200 after it"
                + (f" ({back:%H:%M:%S.%f})" if back else " (never)")
            )
        for when, status, database in self.health:
            print(f"  /health {when:%H:%M:%S.%f}: {status} database={database}")
        exited = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
        print(f"  processes that exited by themselves: {exited or 'none'}")
        if self.web_pids:
            replaced = len(set().union(*self.web_pids) - self.web_pids[0])
            print(f"  gunicorn workers replaced by the master: {replaced}")
        print(f"  PostgreSQL connections: max {max(self.connections, default=0)}")
        for name, samples in self.rss.items():
            warm = samples[min(2, len(samples) - 1)] if samples else 0
            last = samples[-1] if samples else 0
            top = max(samples, default=0)
            print(f"  RSS {name}: after warm-up {warm} MiB, last {last} MiB, max {top} MiB")

    def close(self) -> None:
        self.stop.set()
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self.admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--long", action="store_true", help="30 minutes")
    parser.add_argument("--cron", type=int, default=2000)
    parser.add_argument("--intervals", type=int, default=500)
    parser.add_argument("--web", type=int, default=4)
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reads", type=float, default=20)
    parser.add_argument(
        "--kill", action="store_true", help="SIGKILL a scheduler and a worker halfway, restart them"
    )
    parser.add_argument(
        "--restart-postgres",
        action="store_true",
        help="restart the PostgreSQL cluster halfway (pg_ctlcluster ... restart); nothing else",
    )
    parser.add_argument(
        "--cut-connections",
        type=float,
        metavar="SECONDS",
        help="halfway, end every connection to the soak's database and refuse new ones this long",
    )
    parser.add_argument(
        "--no-vacuum",
        dest="vacuum",
        action="store_false",
        help="on a server with autovacuum off, do not vacuum in its place (see the docs)",
    )
    parser.add_argument("--logs", help="directory for each process's output (default /tmp/<db>)")
    parser.add_argument(
        "--postgres", default=os.environ.get("ALMANAC_TEST_POSTGRES_URL", PG_DEFAULT)
    )
    args = parser.parse_args()
    minutes = 30 if args.long else args.minutes
    soak = Soak(args)
    threads: list[threading.Thread] = []
    try:
        base = soak.setup()
        threads = [
            threading.Thread(target=soak.observe),
            threading.Thread(target=soak.load, args=(base,)),
            threading.Thread(target=soak.watch_health, args=(base,)),
        ]
        with soak.admin.connect() as conn:
            autovacuum = conn.scalar(text("SHOW autovacuum")) == "on"
        if not autovacuum and args.vacuum:
            threads.append(threading.Thread(target=soak.stand_in_for_autovacuum))
        for thread in threads:
            thread.start()
        began = datetime.now(UTC)
        print(f"soaking {minutes} min: {args} (logs in {soak.logs})", flush=True)
        if args.kill or args.restart_postgres or args.cut_connections:
            time.sleep(minutes * 30)
            if args.kill:
                soak.kill_and_replace(["scheduler0", "worker0"])
            if args.restart_postgres:
                soak.restart_postgres()
            if args.cut_connections:
                soak.cut_connections(args.cut_connections)
            time.sleep(minutes * 30)
        else:
            time.sleep(minutes * 60)
        # Measure whole minutes from the first that begins a full minute after the processes
        # started (the first burst is their warm-up) and before the last (still firing). From
        # the minute after `began`, the warm-up burst was measured whenever the soak began late
        # in a minute (at :59 it came a second after the start, processes still importing).
        minute = timedelta(minutes=1)
        start = (began + minute).replace(second=0, microsecond=0) + minute
        end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
        time.sleep(30)  # let the last measured occurrences start
    finally:
        soak.stop.set()
        for thread in threads:
            thread.join()
        report: Any = None
        try:
            if threads:
                report = (start, end)
                soak.report(report)
        finally:
            soak.close()


if __name__ == "__main__":
    main()
