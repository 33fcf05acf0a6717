"""The tick checks its time budget after every schedule, not every 500 (finding 1)."""

from __future__ import annotations

from datetime import timedelta

from app.calendar import parse_instant
from app.context import database
from app.schedules.tick import due as ticking
from tests.security.conftest import deploy


class FakeTime:
    """`monotonic()` is 0 until the first schedule has fired, then far past any budget."""

    def __init__(self) -> None:
        self.expired = False

    def monotonic(self) -> float:
        return 100.0 if self.expired else 0.0


def test_budget_is_checked_after_each_schedule(app, admin_api, monkeypatch):
    deploy(admin_api)
    for index in range(5):
        body = {"id": f"s{index}", "cron": "*/5 * * * *", "action": {"workflow": "wf"}}
        assert admin_api.post("/schedules", json=body).status_code == 201
    fake = FakeTime()
    real_fire_one = ticking.fire_one

    def fire_one(*args, **kwargs):
        rows = real_fire_one(*args, **kwargs)
        fake.expired = True
        return rows

    monkeypatch.setattr(ticking, "time", fake)
    monkeypatch.setattr(ticking, "fire_one", fire_one)
    now = parse_instant("2026-01-05T12:05:00Z")
    db = database(app)
    rows = ticking.fire_due(db, now, timedelta(seconds=60), budget_deadline=50.0)
    assert [row["outcome"] for row in rows] == ["triggered"]
    # The next tick carries on with the rest.
    fake.expired = False
    monkeypatch.setattr(ticking, "fire_one", real_fire_one)
    rest = ticking.fire_due(db, now, timedelta(seconds=60), budget_deadline=50.0)
    assert len(rest) == 4 and {r["schedule_id"] for r in rows + rest} == {f"s{i}" for i in range(5)}


def test_a_stored_spec_over_the_limits_blocks_its_schedule_not_the_tick(app, admin_api):
    from sqlalchemy import update

    from app.db import Schedule

    deploy(admin_api)
    for schedule_id in ("legacy", "fine"):
        body = {"id": schedule_id, "cron": "*/5 * * * *", "action": {"workflow": "wf"}}
        assert admin_api.post("/schedules", json=body).status_code == 201
    # As saved before the limits existed: 40 expressions.
    crons = [f"{minute} * * * *" for minute in range(40)]
    with database(app).session() as session:
        session.execute(
            update(Schedule)
            .where(Schedule.schedule_id == "legacy")
            .values(spec={"cron_expressions": crons, "intervals": [], "timezone": "UTC"})
        )
        session.commit()
    now = parse_instant("2026-01-05T12:05:00Z")
    rows = ticking.fire_due(database(app), now, timedelta(seconds=60), budget_deadline=float("inf"))
    outcomes = {row["schedule_id"]: row["outcome"] for row in rows}
    assert outcomes == {"legacy": "blocked", "fine": "triggered"}
    history = admin_api.get("/schedules/legacy/history").get_json()["events"]
    assert history[-1]["event_type"] == "ScheduleBlocked"
    assert history[-1]["payload"]["reason"] == "spec_invalid"
