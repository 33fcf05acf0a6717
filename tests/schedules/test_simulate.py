"""Simulation (docs/schedules.md, "Simulation"): what a schedule would do, computed, never done."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, text

from app.db import Run
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


def clock_time(instant: str | None) -> str | None:
    """`12:25`, or `12:25:01` off the minute."""
    if instant is None:
        return None
    return instant[11:16] if instant[17:19] == "00" else instant[11:19]


def runs_of(result) -> list[tuple[str, str | None, str | None, str | None, list[str]]]:
    return [
        (
            i["occurrence_time"][11:16],
            i["outcome"],
            clock_time(i["starts_at"]),
            clock_time(i["ends_at"]),
            [r[-7:-3] for r in i["ends_runs"]],
        )
        for i in result["items"]
    ]


def test_buffer_one_keeps_one_waiting_and_drains_it_when_the_run_ends(h):
    result = simulate(h, body(h, overlap_policy="buffer_one", run_duration="PT25M"))
    assert brief(result) == [
        ("12:00", "started", None),
        ("12:10", "buffered", None),
        ("12:20", "skipped", "buffer_full"),
        ("12:30", "buffered", None),
        ("12:40", "skipped", "buffer_full"),
        ("12:50", "skipped", "buffer_full"),
    ]
    # 12:10 starts a tick after the 12:00 run ends (12:25:01). That run ends at 12:50:01, so
    # 12:50 is decided while 12:30 still fills the buffer, which drains at 12:50:02.
    assert [(t, s, e) for t, _, s, e, _ in runs_of(result)] == [
        ("12:00", "12:00", "12:25"),
        ("12:10", "12:25:01", "12:50:01"),
        ("12:20", None, None),
        ("12:30", "12:50:02", "13:15:02"),
        ("12:40", None, None),
        ("12:50", None, None),
    ]
    assert result["items"][1]["run_id"] == "schedule:new:20260105T121000Z"
    assert result["items"][5]["run_id"] is None
    assert result["summary"] == {"started": 1, "skipped": 3, "buffered": 2, "max_concurrent": 1}


def test_buffer_all_queues_everything_and_drains_in_order(h):
    result = simulate(h, body(h, overlap_policy="buffer_all", run_duration="PT25M"))
    assert [(t, o, s) for t, o, s, _, _ in runs_of(result)] == [
        ("12:00", "started", "12:00"),
        ("12:10", "buffered", "12:25:01"),
        ("12:20", "buffered", "12:50:02"),
        ("12:30", "buffered", None),
        ("12:40", "buffered", None),
        ("12:50", "buffered", None),
    ]


def test_cancel_other_and_terminate_other_end_the_previous_run(h):
    for policy in ("cancel_other", "terminate_other"):
        result = simulate(h, body(h, overlap_policy=policy, run_duration="PT25M"))
        assert runs_of(result) == [
            ("12:00", "started", "12:00", "12:10", []),
            ("12:10", "started", "12:10", "12:20", ["1200"]),
            ("12:20", "started", "12:20", "12:30", ["1210"]),
            ("12:30", "started", "12:30", "12:40", ["1220"]),
            ("12:40", "started", "12:40", "12:50", ["1230"]),
            ("12:50", "started", "12:50", "13:15", ["1240"]),
        ]
        assert result["items"][1]["ends_runs"] == ["schedule:new:20260105T120000Z"]
        assert result["summary"]["max_concurrent"] == 1


def test_allow_all_runs_alongside_and_counts_the_peak(h):
    result = simulate(h, body(h, overlap_policy="allow_all", run_duration="PT25M"))
    assert [o for _, o, _ in brief(result)] == ["started"] * 6
    assert result["summary"] == {"started": 6, "skipped": 0, "buffered": 0, "max_concurrent": 3}


def test_max_runs_stops_after_the_last_run(h):
    result = simulate(h, body(h, overlap_policy="allow_all", max_runs=3))
    assert brief(result) == [("12:00", "started", None), ("12:10", "started", None)] + [
        ("12:20", "started", None)
    ]


def test_max_runs_reached_while_draining_drops_the_rest_of_the_buffer(h):
    result = simulate(
        h, body(h, overlap_policy="buffer_all", max_runs=2, run_duration="PT25M", id="b")
    )
    assert brief(result) == [
        ("12:00", "started", None),
        ("12:10", "buffered", None),
        ("12:20", "skipped", "deleted"),
    ]
    # The run ends at 12:25 in that tick's deadline phase; the buffer drains at the next tick.
    assert result["items"][1]["starts_at"] == "2026-01-05T12:25:01Z"
    assert result["items"][1]["run_id"] == "schedule:b:20260105T121000Z"


def test_a_stored_schedule_continues_from_its_runs_and_remaining_runs(h):
    h.create("s", cron="*/10 * * * *", overlap_policy="skip", max_runs=3)
    h.tick("12:10")
    window = {"from": utc("12:10:30"), "to": utc("14:00"), "run_duration": "PT25M"}
    result = simulate(h, window, "s")
    # The 12:10 run (stored, active) lasts until 12:35; two runs remain.
    assert brief(result) == [
        ("12:20", "skipped", "overlap_policy_skip"),
        ("12:30", "skipped", "overlap_policy_skip"),
        ("12:40", "started", None),
        ("12:50", "skipped", "overlap_policy_skip"),
        ("13:00", "skipped", "overlap_policy_skip"),
        ("13:10", "started", None),
    ]
    assert result["summary"]["max_concurrent"] == 1


def test_cancel_other_waits_for_a_run_in_the_middle_of_a_step(h):
    h.create("s", cron="*/10 * * * *", overlap_policy="cancel_other")
    h.tick("12:10")
    with h.db.session() as session:
        run = session.scalar(select(Run).where(Run.schedule_id == "s"))
        run.lease_owner = "worker-1"
        session.commit()
    window = {"from": utc("12:10:30"), "to": utc("12:21"), "run_duration": "PT15M"}
    first = simulate(h, window, "s")["items"][0]
    # The leased run finishes its step first: nothing ends at once, two runs overlap.
    assert first["ends_runs"] == [] and first["outcome"] == "started"
    assert simulate(h, window, "s")["summary"]["max_concurrent"] == 2
    h.save(h.read() | {"overlap_policy": "terminate_other"}, revision=h.read()["revision"])


@pytest.mark.parametrize("policy", ["skip", "fire_once"])
def test_missed_policy_after_the_ticker_was_down_matches_the_tick(h, policy):
    h.create("s", cron="*/5 * * * *", missed_policy=policy)
    h.set_clock("12:30:30")
    window = {"from": utc("12:30:30"), "to": utc("12:40")}
    result = simulate(h, window, "s")
    h.tick("12:30:30")
    fired = "12:30" if policy == "skip" else "12:05"
    missed = [m for m in ("12:05", "12:10", "12:15", "12:20", "12:25", "12:30") if m != fired]
    assert brief(result) == sorted(
        [(m, "skipped", "missed") for m in missed]
        + [(fired, "started", None), ("12:35", "started", None)]
    )
    started = next(i for i in result["items"] if i["occurrence_time"][11:16] == fired)
    assert started["starts_at"] == "2026-01-05T12:30:30Z"
    ledger = [(o["kind"], o["instant"][11:16], o["reason"], o["run_id"]) for o in h.ledger()]
    assert sorted(ledger) == sorted(
        [("skipped", missed[0], "missed", None), ("started", fired, None, started["run_id"])]
    )


def test_jitter_matches_the_schedules_own_due_times(h):
    h.create("s", cron="*/10 * * * *", jitter_seconds=300, overlap_policy="allow_all")
    upcoming = h.read()["upcoming"]
    stored = simulate(h, {"from": utc("12:00:01"), "to": utc("13:00")}, "s")
    assert [i["due_at"] for i in stored["items"][:5]] == [u["at"] for u in upcoming]
    assert all(i["starts_at"] == i["due_at"] for i in stored["items"])
    assert any(i["due_at"] != i["occurrence_time"] for i in stored["items"])
    # A save body naming the schedule draws the same jitter (a replacement keeps its uid).
    saved = {"id": "s", "cron": "*/10 * * * *", "jitter_seconds": 300}
    same = simulate(h, body(h, **saved, overlap_policy="allow_all", **{"from": utc("12:00:01")}))
    assert same["items"] == stored["items"]
    # A new schedule's jitter is the same on every call.
    fresh = body(h, jitter_seconds=300)
    assert simulate(h, fresh) == simulate(h, fresh)


def test_more_than_1000_occurrences_are_truncated(h):
    result = simulate(h, body(h, cron="* * * * *", to="2026-01-07T12:00:00Z"))
    assert result["truncated"] is True
    assert len(result["items"]) == 1000
    assert result["items"][-1]["occurrence_time"] == "2026-01-06T04:39:00Z"
    assert sum(result["summary"][k] for k in ("started", "skipped", "buffered")) == 1000
    exact = simulate(h, body(h, cron="* * * * *", to="2026-01-06T04:40:00Z"))
    assert exact["truncated"] is False and len(exact["items"]) == 1000


def test_a_paused_schedule_does_nothing(h):
    h.create("s", cron="*/10 * * * *")
    h.post("s", "pause")
    assert simulate(h, {"from": utc("12:00"), "to": utc("13:00")}, "s")["items"] == []


def test_simulation_writes_nothing(h, backend):
    h.create("s", cron="*/10 * * * *", overlap_policy="terminate_other", max_runs=2)
    h.tick("12:10")
    saved = body(h, id="s", overlap_policy="terminate_other", max_runs=1)
    new = body(h, id="fresh")
    before = (h.counts(), h.read(), h.history(), sequences(h, backend))
    window = {"from": utc("12:10:30"), "to": utc("14:00"), "run_duration": "PT5M"}
    assert simulate(h, window, "s")["summary"]["started"] == 1
    assert simulate(h, saved)["summary"]["started"] == 1
    assert simulate(h, new)["summary"]["started"] == 6
    assert (h.counts(), h.read(), h.history(), sequences(h, backend)) == before
    assert h.api.get("/schedules/fresh").status_code == 404


def sequences(h, backend: str) -> list[tuple[str, int | None]]:
    """Every PostgreSQL sequence's position (SQLite allocates ids from the rows themselves)."""
    if backend != "postgres":
        return []
    with h.db.session() as session:
        rows = session.execute(text("SELECT sequencename, last_value FROM pg_sequences"))
        return sorted((name, value) for name, value in rows)


def test_a_viewer_may_simulate_and_an_outsider_is_refused_like_any_read(h, api_for):
    h.create("s", cron="*/10 * * * *")
    viewer = api_for("vera", "viewer")
    window = {"from": utc("12:00:30"), "to": utc("13:00")}
    assert len(simulate(h, window, "s", api=viewer)["items"]) == 5
    assert len(simulate(h, body(h), api=viewer)["items"]) == 6
    outsider = api_for("otto", "operator", "elsewhere")
    headers = {"X-Namespace": "default"}
    # Hidden like any namespace the caller does not belong to: 404, not 403.
    assert outsider.get("/schedules", headers=headers).status_code == 404
    for path, payload in (("/schedules/s/simulate", window), ("/schedules/simulate", body(h))):
        response = outsider.post(path, json=payload, headers=headers)
        assert response.status_code == 404
        assert response.get_json()["error"]["code"] == "NOT_FOUND"
        assert outsider.post(f"/namespaces/default{path}", json=payload).status_code == 404


def test_both_paths_serve_the_same_answer(h):
    h.create("s", cron="*/10 * * * *")
    window = {"from": utc("12:00:30"), "to": utc("13:00")}
    assert h.api.post("/namespaces/default/schedules/s/simulate", json=window).get_json() == (
        simulate(h, window, "s")
    )
    payload = body(h)
    named = h.api.post("/namespaces/default/schedules/simulate", json=payload)
    assert named.status_code == 200 and named.get_json() == simulate(h, payload)


def test_bad_input_is_422_naming_the_field(h):
    h.create("s", cron="*/10 * * * *")
    window = {"from": utc("12:00"), "to": utc("13:00")}
    cases = [
        ({"from": utc("13:00"), "to": utc("12:00")}, "VALIDATION", ["to"]),
        ({"from": utc("12:00"), "to": utc("12:00")}, "VALIDATION", ["to"]),
        (window | {"run_duration": "P1M"}, "VALIDATION", ["run_duration"]),
        (window | {"run_duration": "soon"}, "VALIDATION", ["run_duration"]),
        (window | {"run_duration": "P400D"}, "VALIDATION", ["run_duration"]),
        ({"from": utc("12:00"), "to": "2027-06-01T00:00:00Z"}, "VALIDATION", ["to"]),
        ({"from": "yesterday", "to": utc("13:00")}, "VALIDATION", ["from"]),
        ({"to": utc("13:00")}, "VALIDATION", ["from"]),
        ({"from": "0001-01-01T00:00:00Z", "to": utc("13:00")}, "VALIDATION", ["from"]),
        (window | {"cron": "* * * * *"}, "VALIDATION", ["cron"]),
    ]
    before = h.counts()
    for payload, code, loc in cases:
        response = h.api.post("/schedules/s/simulate", json=payload)
        assert response.status_code == 422, payload
        error = response.get_json()["error"]
        assert error["code"] == code
        assert error["details"]["errors"][0]["loc"] == loc, payload
    bad_body = [
        (body(h, cron="0 0 31 2 *"), "CALENDAR_INVALID"),
        (body(h, run_duration="PT1.5S"), "VALIDATION"),
        (body(h, activation_id="missing"), "VALIDATION"),
        (body(h, overlap_policy="sometimes"), "VALIDATION"),
        ({k: v for k, v in body(h).items() if k != "cron"}, "VALIDATION"),
    ]
    for payload, code in bad_body:
        response = h.api.post("/schedules/simulate", json=payload)
        assert response.status_code == 422, payload
        assert response.get_json()["error"]["code"] == code
    missing = h.api.post("/schedules/nope/simulate", json=window)
    assert missing.status_code == 404
    assert h.counts() == before


def test_the_openapi_document_describes_both_routes(client):
    document = client.get("/api/v1/openapi.json").get_json()
    for path, body_schema in (
        ("/api/v1/namespaces/{ns}/schedules/simulate", "SimulateScheduleIn"),
        ("/api/v1/schedules/{schedule_id}/simulate", "WindowIn"),
    ):
        operation = document["paths"][path]["post"]
        request = operation["requestBody"]["content"]["application/json"]["schema"]
        assert request == {"$ref": f"#/components/schemas/{body_schema}"}
        answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert answer == {"$ref": "#/components/schemas/SimulationOut"}
        assert operation["description"] == "Needs: run.read."
    schemas = document["components"]["schemas"]
    assert set(schemas["SimulationOut"]["properties"]) == {"items", "summary", "truncated"}
    assert set(schemas["SimulateScheduleIn"]["properties"]) >= {
        "from",
        "to",
        "run_duration",
        "cron",
    }
    item = schemas["SimulatedItemOut"]["properties"]
    assert item["outcome"]["enum"] == ["started", "skipped", "buffered"]


def test_a_pending_occurrence_is_retried_within_its_grace_and_skipped_after(h):
    h.create("s", cron="*/5 * * * *", overlap_policy="allow_all")
    h.create("t", cron="*/5 * * * *", overlap_policy="allow_all")
    h.set_limit(1)
    assert sorted(r["outcome"] for r in h.tick("12:05")) == ["refused", "triggered"]
    refused = "t" if h.read("t")["fires_count"] == 0 else "s"
    h.set_limit(None)
    late = simulate(h, {"from": utc("12:06:30"), "to": utc("12:11")}, refused)
    assert brief(late) == [("12:05", "skipped", "capacity"), ("12:10", "started", None)]
    soon = simulate(h, {"from": utc("12:05:30"), "to": utc("12:06")}, refused)
    assert brief(soon) == [("12:05", "started", None)]
    assert soon["items"][0]["starts_at"] == "2026-01-05T12:05:30Z"
    # The real tick at the same instant does what the simulation said.
    rows = h.tick("12:05:30")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("triggered", soon["items"][0]["run_id"])
    ]


def test_a_retried_last_run_is_started_once_by_the_ticker_as_simulated(h):
    h.create("a", cron="*/5 * * * *", overlap_policy="allow_all")
    h.create("s", cron="*/5 * * * *", max_runs=1)
    h.set_limit(1)
    assert [r["outcome"] for r in h.tick("12:05")] == ["triggered", "refused"]
    h.set_limit(None)
    predicted = simulate(h, {"from": utc("12:05:30"), "to": utc("12:30")}, "s")
    assert brief(predicted) == [("12:05", "started", None)]
    h.tick("12:05:30")
    ledger = [(o["kind"], o["instant"][11:16], o["reason"], o["run_id"]) for o in h.ledger("s")]
    # Started, and not also skipped for capacity when max_runs deleted the schedule.
    assert ledger == [("started", "12:05", None, predicted["items"][0]["run_id"])]
    assert h.read("s")["status"] == "deleted"


def test_buffer_one_agrees_with_the_ticker_when_a_run_ends_on_a_due_time(h):
    # Runs end by their 10-minute timeout, in the tick's deadline phase (after the buffers
    # drained), on a due time of the 5-minute calendar: 12:15 and 12:25 meet a full buffer.
    h.create(
        cron="*/5 * * * *",
        overlap_policy="buffer_one",
        activation_id=h.workflow(timeout_seconds=600),
    )
    window = {"from": utc("12:05"), "to": utc("12:30"), "run_duration": "PT10M"}
    predicted = simulate(h, window, "s")
    assert brief(predicted) == [
        ("12:05", "started", None),
        ("12:10", "buffered", None),
        ("12:15", "skipped", "buffer_full"),
        ("12:20", "buffered", None),
        ("12:25", "skipped", "buffer_full"),
    ]
    # A run ends in its tick's deadline phase; the buffer it freed drains a tick later.
    assert [(i["starts_at"] or "")[11:19] for i in predicted["items"]] == [
        "12:05:00",
        "12:15:01",
        "",
        "12:25:02",
        "",
    ]
    for instant in (
        "12:05",
        "12:10",
        "12:15",
        "12:15:01",
        "12:20",
        "12:25",
        "12:25:01",
        "12:25:02",
    ):
        h.tick(instant)
    ledger = [(o["instant"][11:16], o["kind"], o["reason"], o["run_id"]) for o in h.ledger("s")]
    assert [row[:3] for row in ledger] == [
        ("12:05", "started", None),
        ("12:10", "started", None),
        ("12:15", "skipped", "buffer_full"),
        ("12:20", "started", None),
        ("12:25", "skipped", "buffer_full"),
    ]
    assert [row[3] for row in ledger] == [i["run_id"] for i in predicted["items"]]
    for item in predicted["items"]:
        if item["run_id"] is not None:
            run = h.api.get(f"/runs/{item['run_id']}").get_json()
            assert run["created_at"] == item["starts_at"]


def test_a_stored_schedule_whose_target_is_not_ready_does_nothing(h):
    # The next tick blocks it (activation_not_ready) and nothing starts; the simulation said 4.
    activation = h.workflow()
    h.create("s", cron="*/10 * * * *", activation_id=activation)
    h.retire(activation)
    window = {"from": utc("12:00"), "to": utc("13:00")}
    result = simulate(h, window, "s")
    assert result["items"] == [] and result["summary"]["started"] == 0
    h.tick("12:10")
    assert h.read("s")["status"] == "blocked" and h.ledger("s") == []


def test_a_body_naming_a_deleted_schedule_is_refused_as_its_save_would_be(h):
    h.create("s", cron="*/10 * * * *")
    assert h.post("s", "delete").status_code == 200
    refused = h.api.post("/schedules/simulate", json=body(h) | {"id": "s"})
    assert refused.status_code == 409
    assert refused.get_json()["error"]["code"] == "SCHEDULE_DELETED"
    saved = h.api.post(
        "/schedules",
        json={k: v for k, v in body(h).items() if k not in ("from", "to")} | {"id": "s"},
    )
    assert saved.status_code == 409


def test_a_window_out_of_range_names_the_windows_own_range(h):
    h.create("s", cron="*/10 * * * *")
    for start, end in (
        ("1969-12-31T00:00:00Z", "1970-01-02T00:00:00Z"),
        ("2950-01-01T00:00:00Z", "2950-01-02T00:00:00Z"),
    ):
        refused = h.api.post("/schedules/s/simulate", json={"from": start, "to": end})
        assert refused.status_code == 422
        (error,) = refused.get_json()["error"]["details"]["errors"]
        assert error == {
            "loc": ["from"],
            "msg": "must be from 1970-01-01T00:00:00Z to before 2900-01-01T00:00:00Z",
        }
