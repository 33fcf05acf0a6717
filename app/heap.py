"""The garbage collector of a long-running process (a server, `scheduler run`, `worker`).

CPython's cyclic collector runs a young collection every 700 net container allocations and,
every hundred of those, a full one that walks every object the process holds: the modules,
SQLAlchemy's metadata and compiled statements, Flask, the calendar's tables. A tick firing
10,000 schedules allocates millions of containers, and spent about 14% of its time in those
walks (two full collections of 0.15 s, docs/benchmarks.md). Almost none of what they walk is
ever garbage.

`settle()` is called once a process has loaded what it keeps: it collects what startup left,
then freezes the rest (`gc.freeze`: collections skip it from then on; with `gunicorn --preload`
the forked workers also stop touching, and so copying, the pages they share with the master),
and raises the young threshold so a burst of short-lived rows costs a few cheap collections.
Cycles are still collected: only less often, and without walking the frozen startup heap.
"""

from __future__ import annotations

import gc

# Net container allocations between young collections (CPython's default is 700). The tick's
# pages, a worker's batch and a request each make thousands; 10,000 kept a 10,000-schedule tick
# at 19 young collections instead of 314, and garbage held between them is a few MiB at most.
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Collect, freeze what is left, and collect the young less often (see the module)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
