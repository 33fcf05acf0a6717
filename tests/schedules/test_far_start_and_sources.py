"""Far `start_at` forecasts, the expression a run's `ScheduleTriggered` names, the range
message, and `cron` beside `cron_expressions` (docs/schedules.md, docs/calendar.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.test_pages import sign_in

DAILY = "0 0 * * *"


def save(h, schedule_id: str, spec: dict[str, Any], **fields: Any) -> Any:
    h.workflow()
    body = {"schedule_id": schedule_id, "spec": spec, "action": {"workflow": "invoice-sync"}}
    return h.api.post("/schedules", json=body | fields)


def origins(h, schedule_id: str = "s") -> dict[str, Any]:
    """Each run's occurrence time -> the `cron_expression` of its `ScheduleTriggered`."""
    found = {}
    for run in h.runs(schedule_id):
        first = h.run_events(run.run_id)[0]
        assert first.event_type == "ScheduleTriggered"
        found[first.payload["occurrence_time"]] = first.payload["cron_expression"]
    return found


# --- a start more than 50 years away ------------------------------------------------------


@pytest.mark.parametrize(
    "start, fires",
    [
        ("2090-01-01T00:00:00Z", ["2090-01-01", "2090-01-02", "2090-01-03"]),
        # The calendar ends with year 9000, the last an instant may name: a start in its last
        # days has their fires left (it ended when the year began, and such a start was refused).
        ("8999-12-31T00:00:00Z", ["8999-12-31", "9000-01-01", "9000-01-02"]),
        ("9000-12-30T00:00:00Z", ["9000-12-30", "9000-12-31"]),
    ],
)
def test_a_far_start_lists_the_fires_its_next_fire_at_announces(h, start, fires):
    h.set_clock("2026-12-04T00:00:00Z")
    created = save(h, "far", {"cron_expressions": [DAILY], "start_at": start})
    assert created.status_code == 201, created.get_json()
    assert created.get_json()["next_fire_at"] == start
    body = h.api.get("/schedules/far?upcoming=3").get_json()
    assert [item["at"] for item in body["upcoming"]] == [f"{day}T00:00:00Z" for day in fires]
    assert body["upcoming"][0]["at"] == body["next_fire_at"]


def test_the_console_shows_the_fires_of_a_far_start(h):
    h.set_clock("2026-12-04T00:00:00Z")
    spec = {"cron_expressions": [DAILY], "start_at": "2090-01-01T00:00:00Z"}
    assert save(h, "far", spec).status_code == 201
    sign_in(h.api.client, "olga", "pw-olga-secret")
    page = h.api.client.get("/ns/default/schedules/far")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Nothing upcoming" not in html
    # The second fire is in no other part of the page than the upcoming list.
    assert '<time datetime="2090-01-02T00:00:00+00:00">' in html


def test_a_far_start_keeps_the_50_year_window_of_the_range_check(h):
    # Leap days from 2090: the window ends 50 years after start_at, not after now, and not later.
    h.set_clock("2026-12-04T00:00:00Z")
    spec = {"cron_expressions": ["0 0 29 2 *"], "start_at": "2090-01-01T00:00:00Z"}
    response = h.api.post("/calendar/preview", json={"spec": spec, "count": 100})
    assert response.status_code == 200, response.get_json()
    found = [item["at"][:4] for item in response.get_json()["occurrences"]]
    assert found == [str(year) for year in range(2092, 2137, 4) if year != 2100]
    assert save(h, "far", spec).status_code == 201
    upcoming = h.api.get("/schedules/far?upcoming=100").get_json()["upcoming"]
    assert [item["at"][:4] for item in upcoming] == found


# --- which expression a run names ---------------------------------------------------------


def test_a_run_names_its_schedules_primary_expression_whichever_source_fired(h):
    """`cron_expression` is the schedule's primary (first) expression when it fired, as in the
    reference's origin event: the same for every run of a spec, whichever source produced it."""
    h.set_clock("12:00")
    spec = {
        "cron_expressions": ["0 13 * * *", "30 12 * * *"],
        "intervals": [{"every": "PT10M", "offset": "PT5M"}],
    }
    assert save(h, "s", spec).status_code == 201
    for instant in ("12:05", "12:30", "13:00"):
        h.tick(instant)
        h.finish()
    assert h.post("s", "trigger").get_json()["outcome"] == "triggered"
    named = [h.run_events(run.run_id)[0].payload["cron_expression"] for run in h.runs("s")]
    assert named == ["0 13 * * *"] * 4
    assert save(h, "i", {"intervals": [{"every": "PT1H"}]}).status_code == 201
    h.tick("14:00")
    assert list(origins(h, "i").values()) == [None]


# --- the range message --------------------------------------------------------------------


@pytest.mark.parametrize(
    "bounds, message",
    [
        ({}, "the spec has no occurrence in the next 50 years"),
        (
            {"end_at": "2090-01-01T00:00:00Z"},
            "the spec has no occurrence in the next 50 years before end_at",
        ),
        (
            {"start_at": "2016-01-01T00:00:00Z"},
            "the spec has no occurrence in the 50 years from start_at",
        ),
    ],
)
def test_the_range_refusal_names_end_at_only_when_the_spec_has_one(h, bounds, message):
    h.set_clock("2015-01-01T00:00:00Z")
    spec = {"intervals": [{"every": "P5200W", "offset": "P5199W"}]} | bounds
    response = save(h, "s", spec)
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["code"] == "SCHEDULE_RANGE"
    assert error["details"]["errors"][0]["msg"] == message
    assert h.api.get("/schedules/s").status_code == 404


# --- `cron` beside `cron_expressions` -----------------------------------------------------


def test_cron_inside_spec_is_appended_to_its_list_but_not_beside_it_at_the_top(h):
    inside = save(h, "s", {"cron_expressions": [DAILY], "cron": "0 1 * * *"})
    assert inside.status_code == 201, inside.get_json()
    assert inside.get_json()["spec"]["cron_expressions"] == [DAILY, "0 1 * * *"]
    top = save(h, "t", {"cron_expressions": [DAILY]}, cron="0 1 * * *")
    assert top.status_code == 422
    assert top.get_json()["error"]["details"]["errors"][0]["loc"] == ["cron"]
    assert h.api.get("/schedules/t").status_code == 404
