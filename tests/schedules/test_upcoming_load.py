"""The namespace's upcoming starts, each distinct calendar expanded once, agree with expanding
every schedule one by one (jitter, max_runs and herds sharing a spec; both databases)."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from app.calendar import Spec, due_time
from app.context import database
from app.db import Namespace
from app.schedules.queries import upcoming_starts
from app.schedules.upcoming import upcoming_load
from tests.support.schedules_harness import at


def _both(h, now, **kwargs):
    with database(h.app).session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        one_by_one = Counter(upcoming_starts(session, namespace, now))
        upcoming = upcoming_load(session, namespace, now, **kwargs)
    grouped: Counter = Counter()
    for instant, many in upcoming.starts:
        grouped[instant] += many
    return one_by_one, grouped, upcoming


def test_grouped_expansion_agrees_with_one_by_one(h):
    ready = h.workflow("report")
    for n in range(6):  # a herd on two calendars
        h.create(f"herd-{n}", "0 * * * *" if n % 2 else "30 9 * * *", activation_id=ready)
    h.create("jittered", "*/15 * * * *", activation_id=ready, jitter_seconds=600)
    h.create("limited", "*/10 * * * *", activation_id=ready, max_runs=3)
    h.create("paused", "*/5 * * * *", activation_id=ready)
    assert h.post("paused", "pause", {"reason": "off"}).status_code == 200
    now = at("12:02")
    h.set_clock(now)
    one_by_one, grouped, upcoming = _both(h, now)
    assert grouped == one_by_one and upcoming.approximate == 0
    # 3 hourly × 24 + 3 daily + 96 jittered + 3 limited; nothing of the paused one.
    assert sum(grouped.values()) == 72 + 3 + 96 + 3
    # The herd's three hourly starts, and the jittered one's when its offset there is zero.
    jittered = h.read("jittered")
    offset = due_time(Spec.from_dict(jittered["spec"]), jittered["uid"], 600, at("13:00"))
    assert grouped[at("13:00")] == 3 + (offset == at("13:00"))

    # Beyond the bound the rest is counted at canonical times, and says how many.
    _, bounded, upcoming = _both(h, now, exact_limit=1)
    assert upcoming.approximate == 1
    assert sum(bounded.values()) == 72 + 3 + 96 + 24 * 6  # the limited one without its limit
