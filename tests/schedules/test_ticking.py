"""Ticking: missed policies, cursors, run ids, jitter, tick rows, the API controls."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.calendar import Spec, format_utc, jitter_offset, next_occurrence
from app.db import Deadline, Namespace
from app.runs import lifecycle
from app.schedules import service
from app.schedules.audit import RUN_ORIGIN_KEYS
from app.schedules.tick import due
from tests.conftest import Api
from tests.support.schedules_harness import at


def test_a_ten_minute_outage_under_skip_is_one_skipped_range_and_the_current_minute_fires(h):
    h.create("s", cron="* * * * *")
    rows = h.tick("12:10:30")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("skipped", "2026-01-05T12:01:00Z"),
        ("triggered", "2026-01-05T12:10:00Z"),
    ]
    assert rows[-1]["run_id"] == "schedule:s:20260105T121000Z"
    assert rows[-1]["next_fire_at"] == "2026-01-05T12:11:00Z"
    ledger = h.ledger()
    assert [(o["kind"], o["instant"], o["through"], o["reason"], o["count"]) for o in ledger] == [
        ("skipped", "2026-01-05T12:01:00Z", "2026-01-05T12:09:00Z", "missed", 9),
        ("started", "2026-01-05T12:10:00Z", None, None, 1),
    ]
    assert ledger[0]["observed_at"] == "2026-01-05T12:10:30Z" and ledger[0]["revision"] == 1
    data = h.read()
    assert data["skipped_trigger_count"] == 9 and data["last_skip_reason"] == "missed"
    assert data["fires_count"] == 1 and data["latest_run_id"] == "schedule:s:20260105T121000Z"
    assert [r.run_id for r in h.runs()] == ["schedule:s:20260105T121000Z"]


def test_grace_is_half_open_so_an_occurrence_at_its_end_is_missed(h):
    h.create("s")
    rows = h.tick("12:15:59")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("skipped", "2026-01-05T12:05:00Z"),
        ("triggered", "2026-01-05T12:15:00Z"),
    ]
    h.finish()
    rows = h.tick("12:21:00")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("skipped", "2026-01-05T12:20:00Z")
    ]
    assert h.ledger()[-1]["through"] == "2026-01-05T12:20:00Z"
    assert len(h.runs()) == 1


def test_fire_once_fires_the_earliest_overdue_occurrence_once(h):
    h.create("s", cron="* * * * *", missed_policy="fire_once")
    rows = h.tick("12:10:30")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("skipped", "2026-01-05T12:02:00Z"),
        ("triggered", "2026-01-05T12:01:00Z"),
    ]
    ledger = h.ledger()
    assert [(o["kind"], o["instant"], o["through"], o["reason"]) for o in ledger] == [
        ("started", "2026-01-05T12:01:00Z", None, None),
        ("skipped", "2026-01-05T12:02:00Z", "2026-01-05T12:10:00Z", "missed"),
    ]
    assert h.tick("12:10:40") == []
    assert len(h.runs()) == 1


def test_repeated_ticks_never_start_an_occurrence_twice(h):
    h.create("s")
    assert [r["outcome"] for r in h.tick("12:05")] == ["triggered"]
    assert h.tick("12:05") == []
    assert h.tick("12:05:30") == []
    h.finish()
    assert [r["run_id"] for r in h.tick("12:10")] == ["schedule:s:20260105T121000Z"]
    assert [r.run_id for r in h.runs()] == [
        "schedule:s:20260105T120500Z",
        "schedule:s:20260105T121000Z",
    ]


def test_the_cursor_and_next_fire_at_never_move_backward(h):
    h.create("s", overlap_policy="allow_all")
    h.tick("12:10")
    assert h.read()["next_fire_at"] == "2026-01-05T12:15:00Z"
    assert h.tick("12:02") == []
    assert h.read()["next_fire_at"] == "2026-01-05T12:15:00Z"
    # Resuming while the clock is behind keeps the cursor where it was.
    h.post("s", "pause")
    resumed = h.post("s", "resume").get_json()
    assert resumed["next_fire_at"] == "2026-01-05T12:15:00Z"
    assert h.tick("12:06") == []
    rows = h.tick("12:15")
    assert [r["run_id"] for r in rows] == ["schedule:s:20260105T121500Z"]
    run_ids = [r.run_id for r in h.runs()]
    assert len(run_ids) == len(set(run_ids)) == 2


def test_the_started_run_begins_with_schedule_triggered_and_carries_the_schedule(h):
    activation = h.workflow(timeout_seconds=3600)
    h.create(
        "s",
        activation_id=activation,
        labels={"team": "billing"},
        memo={"m": 1},
        search_attributes={"tenant_id": "42"},
    )
    h.api.request(
        "PATCH",
        "/schedules/s",
        headers={"If-Match": "1"},
        json={
            "action": {
                "execution_timeout_seconds": 120,
                "run_timeout_seconds": 60,
                "queue": "billing",
            }
        },
    )
    h.tick("12:05")
    (run,) = h.runs()
    assert run.run_id == "schedule:s:20260105T120500Z" and run.schedule_id == "s"
    assert run.labels == {"team": "billing"} and run.memo == {"m": 1}
    assert run.search_attributes == {"tenant_id": "42"} and run.queue == "billing"
    events = h.run_events(run.run_id)
    assert [e.event_type for e in events[:2]] == ["ScheduleTriggered", "run_started"]
    origin = events[0].payload
    assert set(origin) == RUN_ORIGIN_KEYS
    assert origin | {"schedule_uid": None} == {
        "schedule_id": "s",
        "schedule_uid": None,
        "cron_expression": "*/5 * * * *",
        "timezone": "UTC",
        "overlap_policy": "skip",
        "trigger_number": 1,
        "occurrence_time": "2026-01-05T12:05:00Z",
    }
    assert origin["schedule_uid"] == h.read()["uid"]
    with h.db.session() as session:
        deadline = session.scalar(select(Deadline).where(Deadline.run_pk == run.id))
    assert deadline is not None and deadline.kind == "run_timeout"
    assert deadline.due_at == at("12:06")  # min(3600, 120, 60) seconds after the start
    audit = h.history()[-1]
    assert audit["event_type"] == "ScheduleTriggered"
    assert audit["workflow_instance_id"] == run.run_id and audit["workflow_run_id"] == run.uid
    assert audit["payload"]["trigger_number"] == 1
    assert audit["payload"]["command_context"] == {
        "actor": "olga",
        "source": "scheduler",
        "request_id": None,
        "reason": None,
    }


def test_one_page_of_several_schedules_writes_each_its_own_ledger_and_audit_rows(h):
    # One page: "a" skips a range and starts, "b" starts, "c" starts the same instant as "b".
    # Their ledger and audit rows share some columns and differ in others; each must come
    # back as its own.
    h.create("a", cron="* * * * *")
    h.create("b")
    h.create("c", overlap_policy="allow_all")
    rows = h.tick("12:05:30")
    assert sorted((r["schedule_id"], r["outcome"], r["occurrence_time"]) for r in rows) == [
        ("a", "skipped", "2026-01-05T12:01:00Z"),
        ("a", "triggered", "2026-01-05T12:05:00Z"),
        ("b", "triggered", "2026-01-05T12:05:00Z"),
        ("c", "triggered", "2026-01-05T12:05:00Z"),
    ]
    ledgers = {sid: h.ledger(sid) for sid in "abc"}
    assert [
        (o["kind"], o["instant"], o["through"], o["reason"], o["count"]) for o in ledgers["a"]
    ] == [
        ("skipped", "2026-01-05T12:01:00Z", "2026-01-05T12:04:00Z", "missed", 4),
        ("started", "2026-01-05T12:05:00Z", None, None, 1),
    ]
    for sid in "bc":
        (only,) = ledgers[sid]
        assert (only["kind"], only["instant"], only["count"]) == (
            "started",
            "2026-01-05T12:05:00Z",
            1,
        )
        assert only["run_id"] == f"schedule:{sid}:20260105T120500Z"
    assert ledgers["a"][1]["run_id"] == "schedule:a:20260105T120500Z"
    runs = {run.run_id: run for run in h.runs()}
    for sid in "abc":
        audit = h.history(sid)[-1]
        run_id = f"schedule:{sid}:20260105T120500Z"
        assert audit["event_type"] == "ScheduleTriggered"
        assert audit["workflow_instance_id"] == run_id
        assert audit["workflow_run_id"] == runs[run_id].uid
        assert audit["payload"]["trigger_number"] == 1
        assert audit["payload"]["effective_overlap_policy"] == (
            "allow_all" if sid == "c" else "skip"
        )
    skipped = [e for e in h.history("a") if e["event_type"] == "ScheduleTriggerSkipped"]
    assert len(skipped) == 1 and h.event_types("b").count("ScheduleTriggerSkipped") == 0
    assert h.read("a")["skipped_trigger_count"] == 4 and h.read("b")["skipped_trigger_count"] == 0


def test_jitter_is_deterministic_and_delays_the_due_time(h, monkeypatch):
    # A uid whose offset at 13:00 is 16 s: a random one is 0 s once in 601 saves, and the test
    # would then show no delay at all.
    monkeypatch.setattr(service, "new_uid", lambda: "7d4c1b0e-5f1a-4c3e-9a53-2f7c6b8e1d42")
    data = h.create("s", cron="0 * * * *", jitter_seconds=600)
    spec = Spec.from_dict({"cron_expressions": ["0 * * * *"]})
    canonical = at("13:00")
    offset = jitter_offset(data["uid"], canonical, 600, next_occurrence(spec, canonical))
    assert offset == timedelta(seconds=16)
    assert data["next_fire_at"] == format_utc(canonical + offset)
    assert h.tick(canonical) == []
    rows = h.tick(canonical + offset)
    assert [r["outcome"] for r in rows] == ["triggered"]
    # The run id uses the canonical time; occurrence_time is the due time.
    assert rows[0]["run_id"] == "schedule:s:20260105T130000Z"
    assert rows[0]["occurrence_time"] == format_utc(canonical + offset)
    assert h.ledger()[0]["instant"] == "2026-01-05T13:00:00Z"


def test_intervals_and_time_zones_fire_at_their_instants(h):
    activation = h.workflow()
    h.save(
        {
            "id": "i",
            "spec": {"intervals": [{"every": "PT30M", "offset": "PT5M"}]},
            "activation_id": activation,
            "overlap_policy": "allow_all",
        },
        expect=201,
    )
    h.save(
        {
            "id": "ny",
            "cron": "30 7 * * *",
            "timezone": "America/New_York",
            "activation_id": activation,
        },
        expect=201,
    )
    assert h.read("i")["next_fire_at"] == "2026-01-05T12:05:00Z"
    assert h.read("ny")["next_fire_at"] == "2026-01-05T12:30:00Z"
    h.tick("12:05")
    h.tick("12:30")
    h.tick("12:35")
    assert sorted(r.run_id for r in h.runs()) == [
        "schedule:i:20260105T120500Z",
        "schedule:i:20260105T123500Z",
        "schedule:ny:20260105T123000Z",
    ]


def test_tick_and_clock_work_end_to_end_through_the_api(h, admin_api):
    h.create("s")
    response = admin_api.post("/admin/clock", json={"now": "2026-01-05T12:05:00Z", "tick": True})
    assert response.status_code == 200
    rows = response.get_json()["rows"]
    assert rows == [
        {
            "schedule_id": "s",
            "namespace": "default",
            "outcome": "triggered",
            "occurrence_time": "2026-01-05T12:05:00Z",
            "run_id": "schedule:s:20260105T120500Z",
            "next_fire_at": "2026-01-05T12:10:00Z",
        }
    ]
    again = admin_api.post("/admin/tick", json={}).get_json()
    assert again["rows"] == [] and again["now"] == "2026-01-05T12:05:00Z"


def test_namespaces_take_turns_page_by_page(h, accounts, monkeypatch, backend):
    """SQLite interleaves pages of namespaces; PostgreSQL visits one namespace at a time in
    bound transactions, in the rotation's order (tests/db/test_due_rotation.py)."""
    monkeypatch.setattr(due, "PAGE_SIZE", 2)
    activations = {ns: h.workflow(namespace=ns) for ns in ("alpha", "beta")}
    for ns in ("alpha", "beta"):
        token = accounts.create(f"writer-{ns}", "operator", ns).token
        api = Api(h.api.client, token)
        for index in range(4):
            body = {"id": f"{ns}-{index}", "cron": "*/5 * * * *", "activation_id": activations[ns]}
            response = api.post(f"/namespaces/{ns}/schedules", json=body)
            assert response.status_code == 201, response.get_json()
    rows = h.tick("12:05")
    turns = (
        (["alpha", "alpha", "beta", "beta"] * 2, ["beta", "beta", "alpha", "alpha"] * 2)
        if backend == "sqlite"
        else (["alpha"] * 4 + ["beta"] * 4, ["beta"] * 4 + ["alpha"] * 4)
    )
    assert [r["namespace"] for r in rows] in turns
    assert len({r["run_id"] for r in rows}) == 8


def test_a_firing_whose_run_id_is_taken_is_skipped_and_the_schedule_moves_on(h):
    activation = h.workflow()
    h.create("s", activation_id=activation)
    h.create("t", activation_id=activation)
    with h.db.session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        target = lifecycle.resolve_target(session, namespace, activation_id=activation)
        lifecycle.start_run(
            session, at("12:00"), namespace, target, "schedule:s:20260105T120500Z", {}
        )
        session.commit()
    rows = h.tick("12:05")
    assert [(r["schedule_id"], r["outcome"]) for r in rows] == [
        ("s", "skipped"),
        ("t", "triggered"),
    ]
    assert sorted(r.run_id for r in h.runs()) == [
        "schedule:s:20260105T120500Z",
        "schedule:t:20260105T120500Z",
    ]
    # The clash is recorded as a skip and the schedule is not stuck on the same id.
    assert [(o["kind"], o["reason"]) for o in h.ledger("s")] == [("skipped", "run_id_taken")]
    assert h.event_types("s") == ["ScheduleCreated", "ScheduleTriggerSkipped"]
    assert h.read("s")["next_fire_at"] == "2026-01-05T12:10:00Z"
    h.tick("12:10")
    assert "schedule:s:20260105T121000Z" in {r.run_id for r in h.runs()}


def _plant(h, run_id):
    """A run made by hand under the id a firing will need."""
    activation = h.workflow()
    with h.db.session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        target = lifecycle.resolve_target(session, namespace, activation_id=activation)
        lifecycle.start_run(session, at("12:00"), namespace, target, run_id, {})
        session.commit()
    return activation


@pytest.mark.parametrize(
    ("policy", "taken", "missed"),
    [
        # skip: the latest occurrence within its grace fires, the older ones are missed.
        ("skip", "12:10", ("12:01", "12:09", 9)),
        # fire_once: the earliest fires, the rest are missed.
        ("fire_once", "12:01", ("12:02", "12:10", 9)),
    ],
)
def test_a_taken_run_id_skips_only_the_occurrence_that_needed_it(h, policy, taken, missed):
    stamp = f"20260105T{taken.replace(':', '')}00Z"
    activation = _plant(h, f"schedule:s:{stamp}")
    h.create("s", cron="* * * * *", missed_policy=policy, activation_id=activation)
    rows = h.tick("12:10:30")
    assert {(r["outcome"], r["occurrence_time"]) for r in rows} == {
        ("skipped", f"2026-01-05T{taken}:00Z"),
        ("skipped", f"2026-01-05T{missed[0]}:00Z"),
    }
    ledger = sorted(h.ledger("s"), key=lambda o: o["instant"])
    first, through, count = missed
    expected = [
        ("skipped", f"2026-01-05T{taken}:00Z", f"2026-01-05T{taken}:00Z", "run_id_taken", 1),
        ("skipped", f"2026-01-05T{first}:00Z", f"2026-01-05T{through}:00Z", "missed", count),
    ]
    assert [
        (o["kind"], o["instant"], o["through"], o["reason"], o["count"]) for o in ledger
    ] == sorted(expected, key=lambda row: row[1])
    # Every occurrence up to now is accounted for once, and the schedule moved on.
    assert h.read("s")["next_fire_at"] == "2026-01-05T12:11:00Z"
    assert [r.run_id for r in h.runs()] == [f"schedule:s:{stamp}"]
    assert h.tick("12:10:40") == []
