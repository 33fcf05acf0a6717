"""Capacity, max_runs, principals and targets that block, calendars that run out."""

from __future__ import annotations

import threading

from sqlalchemy import select

from app.db import Run, ScheduleRevision
from app.runs import lifecycle
from app.schedules.audit import EVENT_KEYS
from app.schedules.tick import due


def hold_the_only_slot(h):
    """A yearly schedule triggered by hand keeps one run active; the namespace allows one."""
    h.create("hog", cron="0 0 1 1 *")
    assert h.post("hog", "trigger").get_json()["outcome"] == "triggered"
    h.set_limit(1)


def test_capacity_refusal_retries_the_same_occurrence_until_it_fits(h):
    h.create("s", cron="*/10 * * * *")
    hold_the_only_slot(h)
    rows = h.tick("12:10")
    assert [(r["schedule_id"], r["outcome"], r["run_id"]) for r in rows] == [("s", "refused", None)]
    assert h.read("s")["next_fire_at"] == "2026-01-05T12:10:00Z"
    assert h.read("s")["status"] == "active"
    # Still inside its grace: retried with the same key, still refused, nothing written.
    assert [r["outcome"] for r in h.tick("12:10:30")] == ["refused"]
    assert h.ledger("s") == [] and h.event_types("s") == ["ScheduleCreated"]
    h.finish()
    rows = h.tick("12:10:40")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("triggered", "schedule:s:20260105T121000Z")
    ]
    assert [o["kind"] for o in h.ledger("s")] == ["started"]


def test_a_buffered_occurrence_refused_for_capacity_names_its_occurrence(h):
    """The drain's refusal row names the occurrence that waits for room, as every tick row
    names the occurrence it acted on (it said `occurrence_time: null`)."""
    h.create("s", cron="*/10 * * * *", overlap_policy="buffer_one")
    assert [r["outcome"] for r in h.tick("12:10")] == ["triggered"]
    assert [r["outcome"] for r in h.tick("12:20")] == ["buffered"]
    h.finish("schedule:s:20260105T121000Z")
    hold_the_only_slot(h)
    rows = h.tick("12:20:10")
    assert [(r["outcome"], r["occurrence_time"], r["run_id"]) for r in rows] == [
        ("refused", "2026-01-05T12:20:00Z", None)
    ]
    h.finish()
    rows = h.tick("12:20:20")
    assert [(r["outcome"], r["occurrence_time"], r["run_id"]) for r in rows] == [
        ("drained", "2026-01-05T12:20:00Z", "schedule:s:20260105T122000Z")
    ]


def test_capacity_counts_the_runs_of_the_page_still_being_written(h, monkeypatch):
    """On PostgreSQL a page is decided while the one before it is still being written; the
    namespace's limit must count that page's runs all the same."""
    monkeypatch.setattr(due, "PAGE_SIZE", 2)
    # Hold each page's writes (on the writer thread) until the next page has counted the
    # namespace's active runs, or for a second if the tick makes that page wait for them.
    state, changed = {"counts": 0, "writes": 0}, threading.Condition()
    real_count, real_flush = lifecycle.count_active_runs, due._flush

    def count(*args, **kwargs):
        with changed:
            state["counts"] += 1
            changed.notify_all()
        return real_count(*args, **kwargs)

    def flush(page):
        if threading.current_thread() is not threading.main_thread():
            with changed:
                state["writes"] += 1
                mine = state["writes"]
                changed.wait_for(lambda: state["counts"] > mine, timeout=1)
        real_flush(page)

    monkeypatch.setattr(lifecycle, "count_active_runs", count)
    monkeypatch.setattr(due, "_flush", flush)
    activation = h.workflow()
    for index in range(7):
        h.create(f"s{index}", cron="*/10 * * * *", activation_id=activation)
    h.set_limit(3)
    rows = h.tick("12:10")
    assert [(r["schedule_id"], r["outcome"]) for r in rows] == [
        ("s0", "triggered"),
        ("s1", "triggered"),
        ("s2", "triggered"),
        ("s3", "refused"),
        ("s4", "refused"),
        ("s5", "refused"),
        ("s6", "refused"),
    ]
    assert sorted(run.schedule_id for run in h.runs()) == ["s0", "s1", "s2"]


def test_an_occurrence_still_refused_when_its_grace_ends_joins_a_capacity_range(h):
    h.create("s", cron="*/10 * * * *")
    hold_the_only_slot(h)
    assert [r["outcome"] for r in h.tick("12:10:59")] == ["refused"]
    rows = h.tick("12:11")
    assert [(r["outcome"], r["occurrence_time"]) for r in rows] == [
        ("skipped", "2026-01-05T12:10:00Z")
    ]
    ledger = h.ledger("s")
    assert [(o["kind"], o["instant"], o["through"], o["reason"]) for o in ledger] == [
        ("skipped", "2026-01-05T12:10:00Z", "2026-01-05T12:10:00Z", "capacity")
    ]
    data = h.read("s")
    assert data["next_fire_at"] == "2026-01-05T12:20:00Z"
    assert data["last_skip_reason"] == "capacity" and data["skipped_trigger_count"] == 1
    assert h.runs("s") == []


def test_max_runs_deletes_the_schedule_after_its_last_start(h):
    data = h.create("s", max_runs=2, overlap_policy="allow_all")
    assert data["remaining_runs"] == 2
    h.tick("12:05")
    assert h.read()["remaining_runs"] == 1
    h.tick("12:10")
    data = h.read()
    assert data["status"] == "deleted" and data["remaining_runs"] == 0
    assert data["next_fire_at"] is None and data["deleted_at"] == "2026-01-05T12:10:00Z"
    deleted = h.history()[-1]
    assert deleted["event_type"] == "ScheduleDeleted"
    assert deleted["payload"]["reason"] == "max_runs_exhausted"
    assert set(deleted["payload"]) == EVENT_KEYS["ScheduleDeleted"]
    assert h.tick("12:15") == []
    assert len(h.runs()) == 2


def test_max_runs_cannot_be_lowered_below_the_runs_already_started(h):
    activation = h.workflow()
    h.create("s", activation_id=activation, max_runs=5, overlap_policy="allow_all")
    h.tick("12:05")
    h.tick("12:10")
    response = h.api.request(
        "PATCH", "/schedules/s", json={"max_runs": 2}, headers={"If-Match": "1"}
    )
    assert response.status_code == 422
    assert response.get_json()["error"]["details"]["errors"][0]["loc"] == ["max_runs"]
    ok = h.api.request("PATCH", "/schedules/s", json={"max_runs": 3}, headers={"If-Match": "1"})
    assert ok.status_code == 200 and ok.get_json()["remaining_runs"] == 1


def test_a_disabled_principal_blocks_without_consuming_an_occurrence(h, api_for):
    h.create("s")
    h.disable_user("olga")
    rows = h.tick("12:05")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [("blocked", None)]
    other = api_for("pavel", "operator")
    data = other.get("/schedules/s").get_json()
    assert data["status"] == "blocked" and data["blocked_reason"] == "principal_unauthorized"
    assert data["next_fire_at"] is None
    blocked = other.get("/schedules/s/history").get_json()["events"][-1]
    assert blocked["event_type"] == "ScheduleBlocked"
    assert blocked["payload"]["reason"] == "principal_unauthorized"
    assert other.get("/schedules/s/occurrences").get_json()["items"] == []
    assert h.runs() == []
    # Later ticks leave a blocked schedule alone; a resume rebinds it from now on.
    h.set_clock("12:32")
    revision = str(data["revision"])
    response = other.post("/schedules/s/resume", json={}, headers={"If-Match": revision})
    assert response.status_code == 200
    resumed = response.get_json()
    assert resumed["status"] == "active" and resumed["principal"] == "pavel"
    assert resumed["next_fire_at"] == "2026-01-05T12:35:00Z"
    assert other.get("/schedules/s/occurrences").get_json()["items"] == []
    rows = h.tick("12:35")
    assert [r["run_id"] for r in rows] == ["schedule:s:20260105T123500Z"]


def test_a_principal_who_lost_the_grant_blocks_the_schedule(h, accounts):
    from app.auth import service
    from app.context import database

    h.create("s")
    with database(h.app).session() as session:
        service.grant_role(session, "olga", "default", "viewer")
        session.commit()
    assert [r["outcome"] for r in h.tick("12:05")] == ["blocked"]


def test_a_retired_pinned_activation_blocks_and_a_save_unblocks(h):
    activation = h.workflow()
    h.create("s", activation_id=activation)
    h.retire(activation)
    assert [r["outcome"] for r in h.tick("12:05")] == ["blocked"]
    data = h.read()
    assert data["blocked_reason"] == "activation_not_ready"
    resume = h.post("s", "resume")
    assert resume.status_code == 409 and resume.get_json()["error"]["code"] == "CONFLICT"
    fresh = h.workflow()
    h.set_clock("12:07")
    saved = h.save(
        {"id": "s", "cron": "*/5 * * * *", "activation_id": fresh},
        revision=data["revision"],
        expect=200,
    )
    assert saved["status"] == "active" and saved["blocked_reason"] is None
    assert saved["next_fire_at"] == "2026-01-05T12:10:00Z"
    assert h.ledger() == []
    assert [r["outcome"] for r in h.tick("12:10")] == ["triggered"]


def test_a_workflow_action_follows_the_newest_ready_activation(h):
    first = h.workflow("flow")
    h.save({"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "flow"}}, expect=201)
    h.tick("12:05")
    second = h.workflow("flow")
    h.finish()
    h.tick("12:10")
    assert [r.activation_id for r in h.runs()] == [first, second]
    h.retire(second)
    h.retire(first)
    h.finish()
    assert [r["outcome"] for r in h.tick("12:15")] == ["blocked"]
    assert h.read()["blocked_reason"] == "activation_not_ready"


def test_a_calendar_that_runs_out_blocks_the_schedule(h):
    activation = h.workflow()
    h.save(
        {
            "id": "s",
            "spec": {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:10:00Z"},
            "activation_id": activation,
            "overlap_policy": "allow_all",
        },
        expect=201,
    )
    h.tick("12:05")
    rows = h.tick("12:10")
    assert [r["outcome"] for r in rows] == ["triggered", "blocked"]
    data = h.read()
    assert data["status"] == "blocked" and data["blocked_reason"] == "calendar_exhausted"
    # Blocking is a change of the schedule: a new revision, recorded like any other.
    assert data["revision"] == 2
    with h.db.session() as session:
        latest = session.scalars(
            select(ScheduleRevision).order_by(ScheduleRevision.revision.desc())
        ).first()
        assert (latest.revision, latest.config["status"]) == (2, "blocked")
        assert latest.config["blocked_reason"] == "calendar_exhausted"
    stale = h.api.request("PATCH", "/schedules/s", json={"notes": "x"}, headers={"If-Match": "1"})
    assert stale.status_code == 409
    assert h.tick("12:15") == []
    # Its notes and labels may still change; it stays blocked until its calendar does.
    patch = {"notes": "ran its course", "labels": {"done": "yes"}}
    noted = h.api.request("PATCH", "/schedules/s", json=patch, headers={"If-Match": "2"})
    assert noted.status_code == 200, noted.get_json()
    data = noted.get_json()
    assert data["notes"] == "ran its course" and data["revision"] == 3
    assert data["status"] == "blocked" and data["blocked_reason"] == "calendar_exhausted"
    assert h.tick("12:20") == []
    extended = {"spec": {"end_at": "2026-01-05T13:00:00Z"}}
    later = h.api.request("PATCH", "/schedules/s", json=extended, headers={"If-Match": "3"})
    assert later.status_code == 200 and later.get_json()["status"] == "active"
    # The audit event says this save unblocked it; the notes-only one did not.
    updates = [
        e["payload"]["changed_fields"]
        for e in h.api.get("/schedules/s/history").get_json()["events"]
        if e["event_type"] == "ScheduleUpdated"
    ]
    assert updates == [["labels", "notes"], ["spec", "status"]]


def test_a_calendar_that_runs_out_drains_its_buffer_before_it_blocks(h):
    """The occurrences a buffer policy accepted before the calendar's end still run: the
    schedule stays active, with no next due time, until the last one has left the buffer, and
    blocks then. (It blocked at once and kept them buffered for good: never run, never
    dropped.) The simulation predicts the same."""
    activation = h.workflow()
    body = {
        "id": "s",
        "spec": {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:15:00Z"},
        "activation_id": activation,
        "overlap_policy": "buffer_all",
    }
    h.save(body, expect=201)
    window = {"from": "2026-01-05T12:00:00Z", "to": "2026-01-05T13:00:00Z"}
    simulated = h.api.post("/schedules/s/simulate", json=window | {"run_duration": "PT12M"})
    assert [(i["occurrence_time"][11:16], i["outcome"], i["starts_at"]) for i in
            simulated.get_json()["items"]] == [
        ("12:05", "started", "2026-01-05T12:05:00Z"),
        ("12:10", "buffered", "2026-01-05T12:17:01Z"),
        ("12:15", "buffered", "2026-01-05T12:29:02Z"),
    ]  # fmt: skip
    assert [r["outcome"] for r in h.tick("12:05")] == ["triggered"]
    assert [r["outcome"] for r in h.tick("12:10")] == ["buffered"]
    assert [r["outcome"] for r in h.tick("12:15")] == ["buffered"]
    data = h.read()
    assert (data["status"], data["next_fire_at"], data["buffered_count"]) == ("active", None, 2)
    # Still active: a change of its notes is taken and leaves it draining.
    noted = h.api.request(
        "PATCH", "/schedules/s", json={"notes": "last ones"}, headers={"If-Match": "1"}
    )
    assert noted.status_code == 200, noted.get_json()
    assert noted.get_json()["status"] == "active"
    h.finish("schedule:s:20260105T120500Z")
    assert [(r["outcome"], r["run_id"]) for r in h.tick("12:17:01")] == [
        ("drained", "schedule:s:20260105T121000Z")
    ]
    assert h.read()["status"] == "active"
    h.finish("schedule:s:20260105T121000Z")
    rows = h.tick("12:29:02")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("drained", "schedule:s:20260105T121500Z"),
        ("blocked", None),
    ]
    data = h.read()
    assert (data["status"], data["blocked_reason"]) == ("blocked", "calendar_exhausted")
    assert data["buffered_count"] == 0
    assert [(o["kind"], o["run_id"]) for o in h.ledger()] == [
        ("started", "schedule:s:20260105T120500Z"),
        ("started", "schedule:s:20260105T121000Z"),
        ("started", "schedule:s:20260105T121500Z"),
    ]
    assert h.event_types()[-2:] == ["ScheduleTriggered", "ScheduleBlocked"]


def patch(h, body, revision):
    answer = h.api.request("PATCH", "/schedules/s", json=body, headers={"If-Match": str(revision)})
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def test_a_schedule_blocked_while_draining_drains_once_its_target_is_ready_again(h):
    """Blocked for its target while it drained the occurrences buffered before its calendar
    ended, it refused every way back (422 SCHEDULE_RANGE: no future occurrence) and kept them
    buffered for good. A save that leaves its spec alone needs no future occurrence: the notes
    are taken, a ready activation unblocks it, and it drains, then blocks."""
    first = h.workflow()
    spec = {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:15:00Z"}
    h.save({"id": "s", "spec": spec, "activation_id": first, "overlap_policy": "buffer_all"})
    for instant in ("12:05", "12:10", "12:15"):
        h.tick(instant)
    h.retire(first)
    h.finish()
    assert [r["outcome"] for r in h.tick("12:16")] == ["blocked"]
    data = h.read()
    assert (data["blocked_reason"], data["buffered_count"]) == ("activation_not_ready", 2)
    noted = patch(h, {"notes": "waiting for a fix"}, data["revision"])
    assert noted["status"] == "blocked" and noted["blocked_reason"] == "activation_not_ready"
    fixed = patch(h, {"activation_id": h.workflow()}, noted["revision"])
    assert (fixed["status"], fixed["next_fire_at"], fixed["buffered_count"]) == ("active", None, 2)
    assert [r["outcome"] for r in h.tick("12:17")] == ["drained"]
    h.finish()
    assert [r["outcome"] for r in h.tick("12:18")] == ["drained", "blocked"]
    assert h.read()["blocked_reason"] == "calendar_exhausted"
    assert [o["kind"] for o in h.ledger()] == ["started"] * 3


def test_resuming_a_blocked_schedule_drains_its_buffer_after_its_calendar_ended(h):
    h.workflow("flow")
    spec = {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:10:00Z"}
    body = {"id": "s", "spec": spec, "action": {"workflow": "flow"}, "overlap_policy": "buffer_one"}
    h.save(body, expect=201)
    h.tick("12:05")
    h.tick("12:10")
    h.retire(h.runs()[0].activation_id)
    h.finish()
    assert [r["outcome"] for r in h.tick("12:11")] == ["blocked"]
    h.workflow("flow")
    resumed = h.post("s", "resume", revision=h.read()["revision"])
    assert resumed.status_code == 200, resumed.get_json()
    assert resumed.get_json()["status"] == "active"
    assert [r["outcome"] for r in h.tick("12:12")] == ["drained", "blocked"]
    assert h.read()["blocked_reason"] == "calendar_exhausted"


def test_unblocking_a_schedule_whose_calendar_ended_with_nothing_buffered_finishes_it(h):
    """Active with nothing left to fire would never be ticked again: it is blocked
    `calendar_exhausted` instead, in the same revision, and the event names the reason."""
    first = h.workflow()
    spec = {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:10:00Z"}
    h.save({"id": "s", "spec": spec, "activation_id": first, "overlap_policy": "allow_all"})
    h.tick("12:05")
    h.retire(first)
    assert [r["outcome"] for r in h.tick("12:10")] == ["blocked"]
    before = h.read()["revision"]
    fixed = patch(h, {"activation_id": h.workflow()}, before)
    assert (fixed["status"], fixed["blocked_reason"]) == ("blocked", "calendar_exhausted")
    assert fixed["revision"] == before + 1
    events = h.api.get("/schedules/s/history").get_json()["events"]
    assert "blocked_reason" in events[-1]["payload"]["changed_fields"]
    assert "status" not in events[-1]["payload"]["changed_fields"]
    refused = h.post("s", "resume", revision=fixed["revision"])
    assert refused.status_code == 422


def test_a_paused_schedule_past_its_end_takes_a_notes_patch_and_refuses_to_resume(h):
    activation = h.workflow()
    h.save(
        {
            "id": "s",
            "spec": {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:10:00Z"},
            "activation_id": activation,
        },
        expect=201,
    )
    assert h.post("s", "pause").status_code == 200
    h.set_clock("13:00")
    noted = h.api.request(
        "PATCH", "/schedules/s", json={"notes": "done"}, headers={"If-Match": "2"}
    )
    assert noted.status_code == 200, noted.get_json()
    assert noted.get_json()["status"] == "paused" and noted.get_json()["notes"] == "done"
    # The calendar is what is checked once the schedule would fire again.
    respelled = h.api.request(
        "PATCH",
        "/schedules/s",
        json={"spec": {"cron_expressions": ["*/10 * * * *"]}},
        headers={"If-Match": "3"},
    )
    assert respelled.status_code == 422
    assert respelled.get_json()["error"]["details"]["errors"][0]["loc"] == ["spec", "end_at"]
    resumed = h.post("s", "resume")
    assert resumed.status_code == 422 and resumed.get_json()["error"]["code"] == "SCHEDULE_RANGE"
    assert h.read()["status"] == "paused"


def test_max_runs_counts_manual_triggers_too(h):
    h.create("s", max_runs=2, overlap_policy="allow_all")
    h.set_clock("12:01")
    assert h.post("s", "trigger").get_json()["outcome"] == "triggered"
    assert h.read()["remaining_runs"] == 1
    h.tick("12:05")
    data = h.read()
    assert data["status"] == "deleted"
    assert len(h.runs()) == 2
    # Deleting itself is a revision too, its row saying so.
    assert data["revision"] == 2
    with h.db.session() as session:
        configs = session.scalars(
            select(ScheduleRevision.config).order_by(ScheduleRevision.revision)
        ).all()
        assert [config["status"] for config in configs] == ["active", "deleted"]


def test_a_schedule_whose_pinned_activation_retired_takes_a_notes_patch_and_stays_put(h):
    first = h.workflow()
    h.create("paused-one", activation_id=first)
    h.create("blocked-one", activation_id=first)
    assert h.post("paused-one", "pause").status_code == 200
    h.retire(first)
    assert [r["outcome"] for r in h.tick("12:05")] == ["blocked"]
    for schedule_id, status in (("paused-one", "paused"), ("blocked-one", "blocked")):
        revision = h.read(schedule_id)["revision"]
        noted = h.api.request(
            "PATCH",
            f"/schedules/{schedule_id}",
            json={"notes": "waiting for v2"},
            headers={"If-Match": str(revision)},
        )
        assert noted.status_code == 200, noted.get_json()
        assert (noted.get_json()["status"], noted.get_json()["notes"]) == (status, "waiting for v2")
    # A change of the action itself still needs a ready target.
    retarget = h.api.request(
        "PATCH",
        "/schedules/paused-one",
        json={"input": {"x": 1}},
        headers={"If-Match": str(h.read("paused-one")["revision"])},
    )
    assert retarget.status_code == 422
    assert retarget.get_json()["error"]["details"]["errors"][0]["loc"] == [
        "action",
        "activation_id",
    ]
    resumed = h.post("paused-one", "resume")
    assert resumed.status_code == 409 and resumed.get_json()["error"]["details"]["reason"] == (
        "activation_not_ready"
    )
    # Pinned to a ready activation, the blocked one is unblocked by the same kind of patch.
    second = h.workflow()
    unblocked = h.api.request(
        "PATCH",
        "/schedules/blocked-one",
        json={"activation_id": second},
        headers={"If-Match": str(h.read("blocked-one")["revision"])},
    )
    assert unblocked.status_code == 200 and unblocked.get_json()["status"] == "active"


def test_cancel_other_at_capacity_asks_the_running_run_to_cancel_then_starts(h):
    """Cancel first, then start: in a full namespace the old run, in the middle of a step, was
    left running (its place was never freed) and every later occurrence was refused too."""
    h.create("s", cron="*/10 * * * *", overlap_policy="cancel_other")
    h.set_limit(1)
    assert [r["outcome"] for r in h.tick("12:10")] == ["triggered"]
    with h.db.session() as session:
        old = session.scalar(select(Run).where(Run.schedule_id == "s"))
        old.lease_owner = "worker-1"  # executing a step: it stops at the step's end
        session.commit()
    assert [r["outcome"] for r in h.tick("12:20")] == ["refused"]
    (old,) = h.runs("s")
    assert old.cancel_requested_at is not None and old.status != "cancelled"
    asked = h.run_events(old.run_id)[-1]
    assert asked.event_type == "cancel_requested"
    assert "has a newer occurrence waiting for its place" in asked.payload["reason"]
    # Retried within its grace: asked once, not again.
    assert [r["outcome"] for r in h.tick("12:20:20")] == ["refused"]
    cancels = [e for e in h.run_events(old.run_id) if e.event_type == "cancel_requested"]
    assert len(cancels) == 1
    # The step ends and the run stops: the same occurrence starts in its place.
    h.finish(old.run_id, "cancelled")
    rows = h.tick("12:20:40")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("triggered", "schedule:s:20260105T122000Z")
    ]
    assert [o["kind"] for o in h.ledger("s")] == ["started", "started"]


def test_a_trigger_at_capacity_asks_no_run_to_cancel(h):
    """A trigger refused for capacity writes nothing (429): it cancels nothing either."""
    h.create("s", cron="0 0 1 1 *", overlap_policy="cancel_other")
    h.set_limit(1)
    assert h.post("s", "trigger").get_json()["outcome"] == "triggered"
    with h.db.session() as session:
        session.scalar(select(Run).where(Run.schedule_id == "s")).lease_owner = "worker-1"
        session.commit()
    h.set_clock("12:00:05")
    refused = h.post("s", "trigger")
    assert refused.status_code == 429, refused.get_json()
    (run,) = h.runs("s")
    assert run.cancel_requested_at is None


def test_cancel_other_asks_nothing_when_other_schedules_hold_the_namespace(h):
    """Cancelling the schedule's own run would not make room: it is left to run."""
    h.create("s", cron="*/10 * * * *", overlap_policy="cancel_other")
    h.set_limit(2)
    assert [r["outcome"] for r in h.tick("12:10")] == ["triggered"]
    with h.db.session() as session:
        session.scalar(select(Run).where(Run.schedule_id == "s")).lease_owner = "worker-1"
        session.commit()
    h.create("hog", cron="0 0 1 1 *")
    assert h.post("hog", "trigger").get_json()["outcome"] == "triggered"
    h.set_limit(1)
    assert [r["outcome"] for r in h.tick("12:20")] == ["refused"]
    (run,) = h.runs("s")
    assert run.cancel_requested_at is None


def test_a_burst_over_several_pages_decides_each_refused_schedule_once(h, monkeypatch):
    """A refused schedule with a backlog keeps its latest occurrence due, which sorts later
    than where it was claimed: a later page of the same tick must not claim and report it
    again (it was listed twice, and a cancel_other schedule asked its runs to cancel twice)."""
    monkeypatch.setattr(due, "PAGE_SIZE", 2)
    activation = h.workflow()
    for index in range(5):
        h.create(f"s{index}", cron="* * * * *", activation_id=activation)
    h.set_limit(1)
    rows = h.tick("12:10:30")
    decided = [(r["schedule_id"], r["outcome"]) for r in rows if r["outcome"] != "skipped"]
    assert decided == [("s0", "triggered")] + [(f"s{i}", "refused") for i in range(1, 5)]
    missed = [r["schedule_id"] for r in rows if r["outcome"] == "skipped"]
    assert missed == [f"s{i}" for i in range(5)]
    for index in range(1, 5):
        assert h.read(f"s{index}")["next_fire_at"] == "2026-01-05T12:10:00Z"
    assert [r.run_id for r in h.runs()] == ["schedule:s0:20260105T121000Z"]
    # The next tick retries each refused occurrence once more, again once each.
    rows = h.tick("12:10:40")
    assert [(r["schedule_id"], r["outcome"]) for r in rows] == [
        (f"s{i}", "refused") for i in range(1, 5)
    ]
