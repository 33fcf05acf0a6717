"""Benchmark: the `almanac` command end to end against a live server (gunicorn) on SQLite.

Run: .venv/bin/python bench/client_bench.py [--events 100000] [--schedules 10000] [--repeat 10]

Data goes into a fresh SQLite file through SQLAlchemy Core in bulk (the console benchmark's
rows): `--schedules` schedules, one of them with `--events` audit events and another with a tenth
as many (to show memory stays flat). Then, timed from outside as a user would see it:
- `almanac --help`, cold (a new process each time): median and worst of `--repeat`;
- `almanac schedules history ID --all -o jsonl > /dev/null`: events/s end to end and the client
  process's peak RSS, for both schedules;
- `almanac schedules list --all -o jsonl` and `--limit 100` over every schedule.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from console_bench import NOW, bulk, event_rows, schedule_rows  # noqa: E402
from sqlalchemy import text  # noqa: E402

from app import create_app  # noqa: E402
from app.auth import service as auth_service  # noqa: E402
from app.context import database  # noqa: E402
from app.db import Base, Schedule, ScheduleHistoryEvent, make_engine  # noqa: E402

BIN = Path(sys.executable).parent
ALMANAC = str(BIN / "almanac")


def populate(url: str, schedules: int, events: int) -> str:
    """Fill the database; return a token of a superuser."""
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    app = create_app({"DATABASE_URL": url, "SCHEDULER": "off", "SECRET_KEY": "bench"})
    with database(app).session() as session:
        user = auth_service.create_user(session, NOW, "bench", "bench-password", superuser=True)
        namespace = auth_service.create_namespace(session, NOW, "default")
        _row, token = auth_service.create_token(session, NOW, "bench", "cli")
        session.commit()
        user_id, namespace_id = user.id, namespace.id
    with engine.begin() as conn:
        bulk(conn, Schedule.__table__, schedule_rows(namespace_id, user_id, schedules))
        pks = [row[0] for row in conn.execute(text("SELECT id FROM schedules ORDER BY id"))]
        per = {pk: 0 for pk in pks} | {pks[0]: events, pks[1]: events // 10}
        bulk(conn, ScheduleHistoryEvent.__table__, event_rows(pks[:2], per))
        conn.execute(text("ANALYZE"))
    engine.dispose()
    return token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_DATABASE_URL": url,
        "ALMANAC_SECRET_KEY": "bench",
        "ALMANAC_SCHEDULER": "off",
    }
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        + ["--threads", "4", "wsgi:app"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            # The health route answers once gunicorn's worker has loaded the app.
            with urllib.request.urlopen(base + "/api/v1/health", timeout=5):
                return proc, base
        except OSError:
            time.sleep(0.1)  # polling a starting process
    raise RuntimeError("server did not start")


# A small launcher process: a child forked from this (large) benchmark process would report this
# process's memory as its own peak RSS, so the client is started from a fresh, small interpreter.
LAUNCHER = """
import resource, subprocess, sys, time
started = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdout=sys.stdout)
elapsed = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{code} {elapsed} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}", file=sys.stderr)
"""
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children so far (gunicorn's master and worker)."""
    pids = [pid] + [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    total = 0
    for each in pids:
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds of the client, and the lines it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines = 0
    assert proc.stdout is not None and proc.stderr is not None
    for chunk in iter(lambda: proc.stdout.read(1 << 16), b""):  # type: ignore[union-attr]
        lines += chunk.count(b"\n")
    report = proc.stderr.read().decode().strip().splitlines()
    proc.wait()
    code, elapsed, peak, cpu = report[-1].split()
    if code != "0":
        raise RuntimeError(f"{args} exited {code}: {report}")
    return float(elapsed), int(peak) / 1024, lines, float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=10)
    options = parser.parse_args()
    print(f"# client benchmark — CPython {platform.python_version()}, {os.cpu_count()} CPUs")
    help_times = [run([ALMANAC, "--help"], dict(os.environ))[0] for _ in range(options.repeat)]
    print(
        f"almanac --help cold start: median {statistics.median(help_times):.3f} s, "
        f"worst {max(help_times):.3f} s over {options.repeat} runs (target <= 0.3 s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir / 'bench.db'}"
        token = populate(url, options.schedules, options.events)
        proc, base = start_server(url, workdir)
        env = dict(os.environ) | {"ALMANAC_URL": base, "ALMANAC_TOKEN": token}
        try:
            measure(env, proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def measure(env: dict[str, str], server_pid: int) -> None:
    """Each command's wall time and items/s, the client's peak RSS, and the CPU seconds spent
    by the client and by the server: on an idle machine the walk can go no faster than the
    busier of the two (they overlap, one page ahead), whatever else shares the CPUs."""
    print("| command | items | seconds | items/s | client RSS MiB | client CPU s | server CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    commands = [
        ("history --all -o jsonl", ["schedules", "history", "sched-000001", "--all"]),
        ("history --all -o jsonl", ["schedules", "history", "sched-000000", "--all"]),
        ("list --all -o jsonl", ["schedules", "list", "--all"]),
        ("list --all --limit 100 -o jsonl", ["schedules", "list", "--all", "--limit", "100"]),
    ]
    for name, args in commands:
        before = cpu_seconds(server_pid)
        seconds, rss, lines, cpu = run([ALMANAC, *args, "-o", "jsonl"], env)
        server = cpu_seconds(server_pid) - before
        print(
            f"| {name} | {lines:,} | {seconds:.2f} | {lines / seconds:,.0f} | {rss:.0f} "
            f"| {cpu:.2f} | {server:.2f} |"
        )
    print(
        "note: the command's start-up is in each client CPU figure; items/s on an idle machine is "
        "at least items / (client CPU + server CPU)"
    )


if __name__ == "__main__":
    main()
