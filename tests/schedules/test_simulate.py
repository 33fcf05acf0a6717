"""Simulation (docs/schedules.md, "Simulation"): what a schedule would do, computed, never done."""

from __future__ import annotations

from typing import Any

from tests.support.schedules_harness import utc


def simulate(h, body: dict[str, Any], schedule_id: str | None = None, api=None, expect=200):
    path = f"/schedules/{schedule_id}/simulate" if schedule_id else "/schedules/simulate"
    response = (api or h.api).post(path, json=body)
    assert response.status_code == expect, response.get_json()
    return response.get_json()


def body(h, cron: str = "*/10 * * * *", **fields: Any) -> dict[str, Any]:
    return {
        "cron": cron,
        "activation_id": h.workflow(),
        "input": {},
        "from": utc("12:00"),
        "to": utc("13:00"),
    } | fields


def brief(result) -> list[tuple[str, str, str | None]]:
    return [(i["occurrence_time"][11:16], i["outcome"], i["reason"]) for i in result["items"]]


def test_every_ten_minutes_with_skip_and_25_minute_runs_starts_at_00_and_30_only(h):
    result = simulate(h, body(h, overlap_policy="skip", run_duration="PT25M"))
    assert brief(result) == [
        ("12:00", "started", None),
        ("12:10", "skipped", "overlap_policy_skip"),
        ("12:20", "skipped", "overlap_policy_skip"),
        ("12:30", "started", None),
        ("12:40", "skipped", "overlap_policy_skip"),
        ("12:50", "skipped", "overlap_policy_skip"),
    ]
    first = result["items"][0]
    assert first == {
        "occurrence_time": "2026-01-05T12:00:00Z",
        "due_at": "2026-01-05T12:00:00Z",
        "outcome": "started",
        "reason": None,
        "run_id": "schedule:new:20260105T120000Z",
        "starts_at": "2026-01-05T12:00:00Z",
        "ends_at": "2026-01-05T12:25:00Z",
        "ends_runs": [],
    }
    assert result["summary"] == {"started": 2, "skipped": 4, "buffered": 0, "max_concurrent": 1}
    assert result["truncated"] is False
