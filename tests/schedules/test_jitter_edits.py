"""A change that keeps the cursor never makes the next occurrence missed: lowering the jitter
moves a not-yet-due occurrence's due time no earlier than the change itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.schedules_harness import Harness

DAY = "2039-01-01T"
NOON_ONE = f"{DAY}13:00:00Z"
EDITED_AT = f"{DAY}13:05:00Z"


def _late_jittered(h: Harness) -> tuple[str, dict[str, Any]]:
    """A schedule whose jitter puts its 13:00 occurrence after 13:10 (a uid in five draws one)."""
    h.workflow("wf")
    for number in range(20):
        body = {"id": f"jp{number}", "cron": "0 13 * * *", "timezone": "UTC", "workflow": "wf"}
        saved = h.save(body | {"input": {}, "jitter_seconds": 3600}, expect=201)
        if saved["next_fire_at"] >= f"{DAY}13:10:00Z":
            return saved["schedule_id"], saved
    raise AssertionError("no uid drew a jitter of ten minutes or more")


def _patch(h: Harness, schedule_id: str, body: dict[str, Any]) -> Any:
    revision = h.read(schedule_id)["revision"]
    headers = {"If-Match": str(revision)}
    return h.api.request("PATCH", f"/schedules/{schedule_id}", json=body, headers=headers)


@pytest.fixture
def jp(h: Harness) -> str:
    h.set_clock(f"{DAY}00:00:00Z")
    schedule_id, _saved = _late_jittered(h)
    h.set_clock(EDITED_AT)
    assert [r for r in h.tick() if r["schedule_id"] == schedule_id] == []
    return schedule_id


@pytest.mark.parametrize("jitter", [0, 60])
def test_lowering_the_jitter_fires_the_pending_occurrence_at_the_next_tick(h, jp, jitter):
    response = _patch(h, jp, {"jitter_seconds": jitter})
    assert response.status_code == 200, response.get_json()
    # Its new jittered time (13:00 or 13:01 at the latest) has passed: it is due now instead.
    assert response.get_json()["next_fire_at"] == EDITED_AT
    # A notes edit after it keeps it so.
    assert _patch(h, jp, {"notes": "n"}).get_json()["next_fire_at"] == EDITED_AT
    assert h.read(jp)["upcoming"][0]["at"] == EDITED_AT
    rows = [r for r in h.tick(f"{DAY}13:05:10Z") if r["schedule_id"] == jp]
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [("triggered", EDITED_AT)]
    assert [(o["kind"], o["instant"]) for o in h.ledger(jp)] == [("started", NOON_ONE)]
    assert "ScheduleTriggerSkipped" not in h.event_types(jp)


def test_the_preview_and_the_simulation_say_what_the_save_then_does(h, jp):
    body = {"schedule_id": jp, "cron": "0 13 * * *", "timezone": "UTC", "jitter_seconds": 0}
    preview = h.api.post("/calendar/preview", json=body | {"count": 2}).get_json()
    assert [item["at"] for item in preview["occurrences"]] == [EDITED_AT, "2039-01-02T13:00:00Z"]
    assert _patch(h, jp, {"jitter_seconds": 0}).get_json()["next_fire_at"] == EDITED_AT
    window = {"from": EDITED_AT, "to": f"{DAY}23:00:00Z"}
    simulated = h.api.post(f"/schedules/{jp}/simulate", json=window).get_json()
    assert [(i["occurrence_time"], i["due_at"], i["outcome"]) for i in simulated["items"]] == [
        (NOON_ONE, EDITED_AT, "started")
    ]


def test_raising_the_jitter_moves_the_occurrence_later_as_before(h, jp):
    _patch(h, jp, {"jitter_seconds": 0})
    later = _patch(h, jp, {"jitter_seconds": 3600}).get_json()["next_fire_at"]
    assert later >= f"{DAY}13:10:00Z"
    assert [r for r in h.tick(f"{DAY}13:05:10Z") if r["schedule_id"] == jp] == []
    rows = [r for r in h.tick(later) if r["schedule_id"] == jp]
    assert [r["outcome"] for r in rows] == ["triggered"]
    assert [(o["kind"], o["instant"]) for o in h.ledger(jp)] == [("started", NOON_ONE)]
