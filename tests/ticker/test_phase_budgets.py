"""Each tick phase has a budget of its own: a backlog in one never starves the firing after it."""

from __future__ import annotations

import time

import pytest

from app.runs import deadlines
from app.ticker import rotation
from tests.support.schedules_harness import Harness, utc

BUDGET = 0.2


@pytest.fixture
def slow_deadlines(app, monkeypatch):
    """A deadline backlog larger than a budget: every page (of one deadline) costs a whole
    budget, as thousands of expired timeouts would; the budgets shrink to keep the test short."""
    app.config["TICK_BUDGET_SECONDS"] = BUDGET
    monkeypatch.setattr(rotation, "PHASE_BUDGET_SECONDS", BUDGET)
    monkeypatch.setattr(deadlines, "PAGE_SIZE", 1)
    page = deadlines.due_page

    def slow_page(session, now, limit=1):
        # A slow database, not a wait for the clock: the manual clock does not move.
        time.sleep(BUDGET)
        return page(session, now, limit)

    monkeypatch.setattr(deadlines, "due_page", slow_page)


def test_a_backlog_of_expired_timeouts_does_not_keep_a_due_schedule_from_firing(
    h: Harness, slow_deadlines
):
    activation = h.workflow("flow", timeout_seconds=60)
    backlog = [h.api.post("/runs", json={"workflow": "flow", "input": {}}) for _ in range(3)]
    assert [r.status_code for r in backlog] == [201, 201, 201]
    h.create("s", "*/5 * * * *", activation_id=activation)
    h.set_clock("12:05:10")
    rows = h.tick()
    # The first tick after the due time fires it, while the timeouts wait their turn.
    assert [(r["schedule_id"], r["outcome"]) for r in rows] == [("s", "triggered")]
    assert [(o["kind"], o["instant"]) for o in h.ledger()] == [("started", utc("12:05"))]
    timed_out = [r.run_id for r in h.runs() if r.status == "timed_out"]
    assert len(timed_out) == 1
    for second in (11, 12, 13):
        h.tick(f"12:05:{second}")
    statuses = sorted(r.status for r in h.runs() if r.schedule_id is None)
    assert statuses == ["timed_out"] * 3
    assert [o["kind"] for o in h.ledger()] == ["started"]
