"""Manual triggers and backfill (docs/schedules.md)."""

from __future__ import annotations

from app.schedules.audit import RUN_ORIGIN_KEYS
from tests.support.schedules_harness import utc


def backfill(h, start, end, **extra):
    body = {"from": f"2026-01-05T{start}:00Z", "to": f"2026-01-05T{end}:00Z", **extra}
    return h.api.post("/schedules/s/backfill", json=body)


def test_trigger_starts_a_run_now_and_is_idempotent_within_the_millisecond(h):
    h.create("s")
    h.set_clock("2026-01-05T12:01:02.345678Z")
    response = h.post("s", "trigger", {"reason": "by hand"})
    assert response.status_code == 200
    body = response.get_json()
    assert body == {
        "outcome": "triggered",
        "reason": None,
        "run_id": "schedule:s:manual:1767614462345",
    }
    events = h.run_events(body["run_id"])
    assert events[0].event_type == "ScheduleTriggered" and set(events[0].payload) == RUN_ORIGIN_KEYS
    again = h.post("s", "trigger").get_json()
    assert again == body
    assert len(h.runs()) == 1
    audit = h.history()[-1]
    assert audit["event_type"] == "ScheduleTriggered"
    assert audit["payload"]["command_context"]["source"] == "api"
    assert audit["payload"]["command_context"]["reason"] == "by hand"
    data = h.read()
    assert data["fires_count"] == 1 and data["latest_run_id"] == body["run_id"]


def test_trigger_applies_the_overlap_policy_or_its_override(h):
    h.create("s")
    h.set_clock("12:01")
    h.post("s", "trigger")
    h.set_clock("12:02")
    skipped = h.post("s", "trigger").get_json()
    assert skipped == {"outcome": "skipped", "run_id": None, "reason": "overlap_policy_skip"}
    h.set_clock("12:03")
    allowed = h.post("s", "trigger", {"overlap_policy": "allow_all"}).get_json()
    assert allowed["outcome"] == "triggered"
    h.set_clock("12:04")
    buffered = h.post("s", "trigger", {"overlap_policy": "buffer_one"}).get_json()
    assert buffered == {"outcome": "buffered", "run_id": None, "reason": None}
    assert h.read()["buffered_count"] == 1


def test_a_trigger_on_a_paused_schedule_never_buffers_for_after_resume(h):
    h.create("s", cron="0 0 1 1 *", overlap_policy="buffer_one")
    h.set_clock("12:01")
    first = h.post("s", "trigger").get_json()
    assert first["outcome"] == "triggered"
    assert h.post("s", "pause").status_code == 200
    h.set_clock("12:02")
    for override in (None, "buffer_all"):
        body = {"overlap_policy": override} if override else {}
        skipped = h.post("s", "trigger", body).get_json()
        assert skipped == {"outcome": "skipped", "run_id": None, "reason": "overlap_policy_skip"}
        h.set_clock("12:03")
    assert h.read()["buffered_count"] == 0
    h.finish(first["run_id"])
    assert h.post("s", "resume").status_code == 200
    h.tick("12:04")
    h.tick("12:05")
    assert [run.run_id for run in h.runs()] == [first["run_id"]]
    # Active again: the schedule's buffer policy applies to triggers as before.
    h.set_clock("12:06")
    assert h.post("s", "trigger").get_json()["outcome"] == "triggered"
    h.set_clock("12:07")
    assert h.post("s", "trigger").get_json()["outcome"] == "buffered"


def test_trigger_at_capacity_answers_429_and_writes_nothing(h):
    h.create("s")
    h.set_limit(0 + 1)
    h.set_clock("12:01")
    h.post("s", "trigger")
    before = h.counts()
    h.set_clock("12:02")
    response = h.post("s", "trigger", {"overlap_policy": "allow_all"})
    assert response.status_code == 429
    assert response.get_json()["error"]["code"] == "CAPACITY"
    assert response.headers["Retry-After"]
    assert h.counts() == before


def test_backfill_covers_from_inclusive_to_exclusive_with_canonical_times(h):
    h.set_clock("12:00")
    h.create("s", jitter_seconds=120, overlap_policy="allow_all")
    h.set_clock("12:30")
    h.post("s", "pause")
    response = backfill(h, "12:05", "12:20")
    assert response.status_code == 200
    body = response.get_json()
    assert [(r["occurrence_time"][11:16], r["outcome"]) for r in body["results"]] == [
        ("12:05", "backfilled"),
        ("12:10", "backfilled"),
        ("12:15", "backfilled"),
    ]
    assert body["started"] == 3 and body["skipped"] == 0
    assert body["results"][0]["run_id"] == "schedule:s:backfill:20260105T120500Z"
    events = h.run_events("schedule:s:backfill:20260105T120500Z")
    assert events[0].payload["occurrence_time"] == "2026-01-05T12:05:00Z"
    origins = {o["origin"] for o in h.ledger()}
    assert origins == {"backfill", "scheduled"}


def test_backfill_is_idempotent_and_never_starts_an_occurrence_twice(h):
    h.create("s", overlap_policy="allow_all")
    h.tick("12:05")
    h.set_clock("12:20")
    h.post("s", "pause")
    first = backfill(h, "12:00", "12:20").get_json()
    assert [(r["occurrence_time"][11:16], r["outcome"]) for r in first["results"]] == [
        ("12:00", "backfilled"),
        ("12:05", "already_started"),
        ("12:10", "backfilled"),
        ("12:15", "backfilled"),
    ]
    assert first["results"][1]["run_id"] == "schedule:s:20260105T120500Z"
    second = backfill(h, "12:00", "12:20").get_json()
    assert {r["outcome"] for r in second["results"]} == {"already_started"}
    assert second["started"] == 0
    assert len(h.runs()) == 4


def test_backfill_treats_buffer_policies_as_allow_all(h):
    h.create("s", overlap_policy="buffer_one")
    h.set_clock("12:20")
    h.post("s", "pause")
    body = backfill(h, "12:05", "12:20").get_json()
    assert body["started"] == 3 and h.read()["buffered_count"] == 0
    assert all(
        e["payload"]["effective_overlap_policy"] == "allow_all"
        for e in h.history()
        if e["event_type"] == "ScheduleTriggered"
    )


def test_backfill_honours_max_runs(h):
    h.create("s", overlap_policy="allow_all", max_runs=2)
    h.set_clock("12:30")
    body = backfill(h, "11:00", "11:20").get_json()
    assert [r["outcome"] for r in body["results"]] == [
        "backfilled",
        "backfilled",
        "skipped",
        "skipped",
    ]
    assert body["results"][2]["reason"] == "max_runs_exhausted"
    assert h.read()["status"] == "deleted"
    assert h.history()[-1]["payload"]["reason"] == "max_runs_exhausted"


def test_backfill_leaves_occurrences_the_scheduler_has_not_reached_to_it(h):
    h.create("s", overlap_policy="allow_all")
    h.set_clock("12:12")
    body = backfill(h, "11:55", "12:12").get_json()
    assert [(r["occurrence_time"][11:16], r["outcome"], r["reason"]) for r in body["results"]] == [
        ("11:55", "backfilled", None),
        ("12:00", "backfilled", None),
        ("12:05", "skipped", "scheduled"),
        ("12:10", "skipped", "scheduled"),
    ]


def test_backfill_refuses_bad_ranges_and_too_many_occurrences(h):
    h.create("s", cron="* * * * *")
    h.set_clock("2026-01-06T12:00:00Z")
    h.post("s", "pause")
    before = h.counts()
    for body, code in (
        ({"from": "2026-01-05T12:00:00Z", "to": "2026-01-05T12:00:00Z"}, "VALIDATION"),
        ({"from": "2026-01-05T12:00:00Z", "to": "2026-01-05T11:00:00Z"}, "VALIDATION"),
        ({"from": "2026-01-05T12:00:00Z", "to": "2026-01-07T11:00:00Z"}, "VALIDATION"),
        ({"from": "2026-01-05T00:00:00Z", "to": "2026-01-05T16:41:00Z"}, "BACKFILL_TOO_LARGE"),
        ({"from": "yesterday", "to": "2026-01-05T11:00:00Z"}, "VALIDATION"),
        ({"to": "2026-01-05T11:00:00Z"}, "VALIDATION"),
    ):
        response = h.api.post("/schedules/s/backfill", json=body)
        assert response.status_code == 422, (body, response.get_json())
        assert response.get_json()["error"]["code"] == code
    # Exactly 1000 occurrences is allowed.
    ok = h.api.post(
        "/schedules/s/backfill",
        json={
            "from": "2026-01-05T00:00:00Z",
            "to": "2026-01-05T16:40:00Z",
            "overlap_policy": "allow_all",
        },
    )
    assert ok.status_code == 200 and ok.get_json()["started"] == 1000
    assert h.counts()["runs"] == before["runs"] + 1000


def test_bounds_finer_than_a_microsecond_never_take_in_an_earlier_occurrence(h):
    """A `from` or `start_at` 100 ns after an occurrence had its extra digits dropped, and took
    that occurrence in (07:00 fired for a start_at of 07:00:00.0000001)."""
    h.set_clock("12:00")
    h.create("s", overlap_policy="allow_all")
    h.set_clock("12:30")
    h.post("s", "pause")
    body = {"from": "2026-01-05T12:05:00.0000001Z", "to": "2026-01-05T12:15:00.0000001Z"}
    answer = h.api.post("/schedules/s/backfill", json=body).get_json()
    assert [r["occurrence_time"][11:16] for r in answer["results"]] == ["12:10", "12:15"]
    spec = {"cron_expressions": ["*/5 * * * *"], "start_at": "2026-01-05T12:35:00.0000001Z"}
    saved = h.save({"id": "late", "spec": spec, "activation_id": h.workflow()}, expect=201)
    assert saved["next_fire_at"] == "2026-01-05T12:40:00Z"
    assert saved["spec"]["start_at"] == "2026-01-05T12:35:00.000001Z"


def _refired_after_the_clock_went_back(h, policy: str) -> list[str]:
    """Pause, backfill the paused span, move the clock back before it, resume and tick through
    it again: the outcomes of those ticks."""
    h.create("s", overlap_policy=policy)
    h.tick("12:05")
    h.finish()
    h.set_clock("12:07")
    h.post("s", "pause")
    h.set_clock("12:30")
    assert backfill(h, "12:07", "12:30").status_code == 200
    h.finish()
    h.set_clock("12:08")
    assert h.post("s", "resume").status_code == 200
    return [
        row["outcome"]
        for instant in ("12:10", "12:15", "12:20", "12:25")
        for row in h.tick(instant)
    ]


def test_occurrences_a_backfill_started_are_not_fired_again_after_the_clock_went_back(h):
    # The cursor stayed where the pause left it; resumed with the clock moved back before the
    # backfilled span, the tick started 12:10-12:25 a second time (ten runs for six occurrences).
    assert _refired_after_the_clock_went_back(h, "allow_all") == []
    ids = [run.run_id for run in h.runs("s")]
    assert ids == ["schedule:s:20260105T120500Z"] + [
        f"schedule:s:backfill:20260105T12{minute}00Z" for minute in ("10", "15", "20", "25")
    ]
    started = [row["instant"] for row in h.ledger() if row["kind"] == "started"]
    assert len(started) == len(set(started)) == 5
    assert h.read()["next_fire_at"] == utc("12:30")


def test_occurrences_a_backfill_skipped_are_not_fired_after_the_clock_went_back(h):
    # Under `skip` a backfill starts the first and skips the rest: those are accounted too.
    assert _refired_after_the_clock_went_back(h, "skip") == []
    assert len(h.runs("s")) == 2
    instants = [(row["instant"], row["through"]) for row in h.ledger()]
    assert len(instants) == len(set(instants))
