"""Actions for worker tests, loaded through ALMANAC_ACTION_MODULES in worker processes.

`probe` appends one JSON line per execution to `args.log` (run, step, attempt, pid, start, end),
sleeping `args.seconds` of real time in between; with ALMANAC_PROBE_BLOCK=1 in the environment it
writes its start line and then blocks until the process is killed. With `args.gate` (a file
path) it writes a `waiting` line and runs until that file exists: an action as long as a test needs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from app.runs.actions import ActionContext, action


def _append(path: str, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


@action("probe")
def probe(ctx: ActionContext) -> dict[str, Any]:
    """Record this execution's interval; block forever when asked to (to be killed)."""
    record = {
        "run": ctx.run_id,
        "step": ctx.step_id,
        "attempt": ctx.attempt,
        "pid": os.getpid(),
        "thread": threading.get_ident(),
        "start": time.monotonic_ns(),
    }
    if ctx.args.get("gate"):
        _append(ctx.args["log"], {**record, "phase": "waiting"})
        while not os.path.exists(ctx.args["gate"]):
            time.sleep(0.02)
    elif os.environ.get("ALMANAC_PROBE_BLOCK") == "1":
        _append(ctx.args["log"], {**record, "phase": "blocking"})
        threading.Event().wait()
    time.sleep(float(ctx.args.get("seconds", 0)))
    _append(ctx.args["log"], {**record, "end": time.monotonic_ns(), "phase": "done"})
    return {"pid": os.getpid()}
