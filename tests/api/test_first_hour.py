"""What a newcomer trips over in the API in the first hour (issue 9): forecasts that respect
`max_runs`, backfill skips that add no ledger row, the same shorthands everywhere, one label
syntax and no silently ignored filter."""

from __future__ import annotations

from tests.support.schedules_harness import utc


def test_upcoming_stops_at_the_runs_a_schedule_has_left(h):
    h.create("s", cron="* * * * *", max_runs=2)
    assert len(h.read()["upcoming"]) == 2
    assert h.api.get("/schedules/s?upcoming=20").get_json()["upcoming"][-1]["at"] == utc("12:02")
    h.post("s", "trigger")
    assert h.read()["remaining_runs"] == 1
    assert [item["at"] for item in h.read()["upcoming"]] == [utc("12:01")]


def test_upcoming_stops_at_end_at_and_is_empty_while_paused(h):
    h.create("s", cron="*/10 * * * *", spec={"end_at": "2026-01-05T12:30:00Z"})
    assert [item["at"] for item in h.read()["upcoming"]] == [
        utc("12:10"),
        utc("12:20"),
        utc("12:30"),
    ]
    h.post("s", "pause")
    assert h.read()["upcoming"] == []


def _occupy(h):
    """A schedule whose only run is still active, so `skip` refuses every other start."""
    h.create("s", cron="*/5 * * * *")
    h.set_clock("12:31")
    h.post("s", "trigger")


def test_a_backfill_skip_is_audited_and_reported_but_adds_no_ledger_row(h):
    _occupy(h)
    body = {"from": "2026-01-05T11:00:00Z", "to": "2026-01-05T11:15:00Z", "overlap_policy": "skip"}
    first = h.api.post("/schedules/s/backfill", json=body).get_json()
    assert [r["outcome"] for r in first["results"]] == ["skipped"] * 3
    assert {r["reason"] for r in first["results"]} == {"overlap_policy_skip"}
    assert first["skipped"] == 3
    assert [row for row in h.ledger() if row["origin"] == "backfill"] == []
    skips = [e for e in h.history() if e["event_type"] == "ScheduleTriggerSkipped"]
    assert len(skips) == 3 and skips[0]["payload"]["reason"] == "overlap_policy_skip"
    counted = h.read()["skipped_trigger_count"]

    again = h.api.post("/schedules/s/backfill", json=body).get_json()
    assert again["skipped"] == 3
    assert h.read()["skipped_trigger_count"] == counted  # occurrences, not attempts
    assert [row for row in h.ledger() if row["origin"] == "backfill"] == []

    h.finish()
    later = h.api.post("/schedules/s/backfill", json=body | {"overlap_policy": "allow_all"})
    assert [r["outcome"] for r in later.get_json()["results"]] == ["backfilled"] * 3


def test_a_backfill_refused_for_capacity_adds_no_ledger_row(h):
    _occupy(h)
    h.set_limit(1)
    body = {"from": "2026-01-05T11:00:00Z", "to": "2026-01-05T11:10:00Z"}
    result = h.api.post("/schedules/s/backfill", json=body | {"overlap_policy": "allow_all"})
    assert {r["reason"] for r in result.get_json()["results"]} == {"capacity"}
    assert [row for row in h.ledger() if row["origin"] == "backfill"] == []


def test_preview_accepts_the_cron_and_timezone_shorthands(h):
    body = {"cron": "30 2 * * *", "timezone": "America/New_York", "count": 2}
    response = h.api.post("/calendar/preview", json=body | {"after": "2026-03-07T00:00:00Z"})
    assert response.status_code == 200, response.get_json()
    assert [o["at"] for o in response.get_json()["occurrences"]] == [
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
    ]
    inside = h.api.post("/calendar/preview", json={"spec": {"cron": "0 * * * *"}, "count": 1})
    assert inside.status_code == 200
    both = h.api.post(
        "/calendar/preview", json={"cron": "0 * * * *", "spec": {"cron": "1 * * * *"}}
    )
    assert both.status_code == 422
    assert both.get_json()["error"]["details"]["errors"][0]["loc"] == ["cron"]
    bad = h.api.post("/calendar/preview", json={"cron": "0 25 * * *"})
    assert bad.status_code == 422
    assert bad.get_json()["error"]["details"]["errors"][0]["loc"][0] == "cron"
    none = h.api.post("/calendar/preview", json={"count": 2})
    assert none.status_code == 422 and "cron" in none.get_json()["error"]["message"]


def test_save_accepts_a_top_level_workflow(h):
    h.workflow("invoice-sync")
    body = {"id": "w", "cron": "0 2 * * *", "workflow": "invoice-sync", "input": {}}
    created = h.save(body, expect=201)
    assert created["action"]["workflow"] == "invoice-sync"
    assert created["action"]["activation_id"] is None
    both = h.save(body | {"id": "w2", "action": {"workflow": "x"}}, expect=422)
    assert both["error"]["details"]["errors"][0]["loc"] == ["workflow"]


def test_label_filters_accept_both_separators_and_refuse_what_they_cannot_read(h):
    h.create("s", labels={"team": "infra"})
    for raw in ("team:infra", "team=infra"):
        listed = h.api.get(f"/schedules?label={raw}").get_json()["items"]
        assert [s["schedule_id"] for s in listed] == ["s"], raw
    assert h.api.get("/schedules?label=team:other").get_json()["items"] == []
    for bad in ("team", ":infra", "bad key!:x"):
        response = h.api.get(f"/schedules?label={bad}")
        assert response.status_code == 422, bad
        error = response.get_json()["error"]
        assert error["details"]["errors"][0]["loc"] == ["query", "label"]
        assert "key:value" in error["message"] or "key:value" in str(error["details"])
    runs = h.api.get("/runs?label=team=infra")
    assert runs.status_code == 200
    assert h.api.get("/runs?label=nothing").status_code == 422


def test_calendar_errors_name_the_field_once(h):
    h.workflow("invoice-sync")
    body = {"id": "x", "cron": "60 * * * *", "workflow": "invoice-sync"}
    error = h.save(body, expect=422)["error"]
    assert error["message"] == "cron.minute: 60 is out of range 0-59"
    preview = h.api.post("/calendar/preview", json={"spec": {"cron_expressions": ["0 24 * * *"]}})
    message = preview.get_json()["error"]["message"]
    assert message == "spec.cron_expressions.0.hour: 24 is out of range 0-23"
    zone = h.api.post("/calendar/preview", json={"cron": "0 * * * *", "timezone": "europe/berlin"})
    assert "did you mean 'Europe/Berlin'?" in zone.get_json()["error"]["message"]


def test_definition_errors_use_the_right_article(admin_api):
    steps = [{"id": "a", "type": "action", "action": "noop", "bogus": 1}]
    response = admin_api.post("/workflows", json={"name": "w", "steps": steps})
    assert response.status_code == 422
    assert "unknown field for an action step" in str(response.get_json())
    assert "a action" not in str(response.get_json())
