"""Saving schedules and revisions with If-Match (docs/schedules.md)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from app.db import ScheduleRevision
from app.errors import AlmanacError
from app.schedules import service
from app.schedules.audit import EVENT_KEYS, CommandContext
from tests.conftest import make_test_app

RESOURCE_FIELDS = {
    "schedule_id",
    "uid",
    "namespace",
    "revision",
    "status",
    "blocked_reason",
    "paused_reason",
    "principal",
    "spec",
    "action",
    "overlap_policy",
    "missed_policy",
    "jitter_seconds",
    "max_runs",
    "labels",
    "memo",
    "search_attributes",
    "notes",
    "next_fire_at",
    "last_fired_at",
    "fires_count",
    "remaining_runs",
    "skipped_trigger_count",
    "last_skip_reason",
    "last_skipped_at",
    "buffered_count",
    "latest_run_id",
    "running_run_ids",
    "created_at",
    "updated_at",
    "deleted_at",
}


def test_the_reference_request_works_verbatim(h):
    activation = h.workflow()
    body = {
        "cron": "*/5 * * * *",
        "timezone": "UTC",
        "missed_policy": "skip",
        "activation_id": activation,
        "input": {},
    }
    response = h.api.post("/schedules", json=body)
    assert response.status_code == 201
    assert response.headers["ETag"] == '"1"'
    data = response.get_json()
    assert set(data) == RESOURCE_FIELDS
    assert data["revision"] == 1 and data["status"] == "active"
    assert data["principal"] == "olga" and data["blocked_reason"] is None
    assert data["next_fire_at"] == "2026-01-05T12:05:00Z"
    assert data["spec"]["cron_expressions"] == ["*/5 * * * *"]
    assert data["action"]["activation_id"] == activation and data["action"]["workflow"] is None
    assert data["schedule_id"].startswith("schedule-")
    events = h.history(data["schedule_id"])
    assert [e["event_type"] for e in events] == ["ScheduleCreated"]
    assert set(events[0]["payload"]) == EVENT_KEYS["ScheduleCreated"]
    assert events[0]["payload"]["next_fire_at"] == "2026-01-05T12:05:00Z"
    assert events[0]["payload"]["command_context"]["source"] == "api"
    assert events[0]["payload"]["command_context"]["actor"] == "olga"


def test_long_form_request_of_the_spec_is_stored_and_read_back(h):
    h.workflow(
        "invoice-sync", input_schema={"type": "object", "properties": {"mode": {"type": "string"}}}
    )
    body = {
        "schedule_id": "daily-invoice-sync",
        "spec": {
            "cron_expressions": ["0 2 * * *"],
            "intervals": [{"every": "PT6H", "offset": "PT5M"}],
            "timezone": "America/New_York",
            "start_at": None,
            "end_at": None,
        },
        "action": {
            "workflow": "invoice-sync",
            "activation_id": None,
            "input": {"mode": "nightly"},
            "execution_timeout_seconds": 120,
            "run_timeout_seconds": 60,
            "queue": None,
        },
        "overlap_policy": "skip",
        "missed_policy": "skip",
        "jitter_seconds": 0,
        "max_runs": None,
        "labels": {"team": "billing"},
        "memo": {},
        "search_attributes": {"tenant_id": "42"},
        "notes": "Runs every night at 2 AM ET.",
    }
    data = h.save(body, expect=201)
    assert data["schedule_id"] == "daily-invoice-sync"
    assert data["spec"]["intervals"] == [{"every": "PT6H", "offset": "PT5M"}]
    assert data["labels"] == {"team": "billing"} and data["notes"].startswith("Runs every")
    # 12:00Z is 07:00 in New York; the next of {02:00 ET, 00:05/06:05/12:05/18:05 UTC} is 12:05Z.
    assert data["next_fire_at"] == "2026-01-05T12:05:00Z"
    read = h.api.get("/schedules/daily-invoice-sync?upcoming=3")
    assert read.headers["ETag"] == '"1"'
    upcoming = read.get_json()["upcoming"]
    assert [u["at"] for u in upcoming] == [
        "2026-01-05T12:05:00Z",
        "2026-01-05T18:05:00Z",
        "2026-01-06T00:05:00Z",
    ]


def test_saving_an_existing_id_without_if_match_is_a_revision_conflict(h):
    h.create("s")
    before = h.counts()
    response = h.api.post(
        "/schedules", json={"id": "s", "cron": "0 * * * *", "activation_id": h.workflow()}
    )
    assert response.status_code == 409
    error = response.get_json()["error"]
    assert error["code"] == "SCHEDULE_REVISION" and error["details"]["current_revision"] == 1
    assert h.counts() == before


def test_if_match_on_a_schedule_that_does_not_exist_is_a_revision_conflict(h):
    activation = h.workflow()
    before = h.counts()
    response = h.api.post(
        "/schedules",
        json={"id": "new", "cron": "0 * * * *", "activation_id": activation},
        headers={"If-Match": '"1"'},
    )
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "SCHEDULE_REVISION"
    assert response.get_json()["error"]["details"]["current_revision"] is None
    assert h.counts() == before


def test_stale_revision_conflicts_and_the_current_one_replaces(h):
    activation = h.workflow()
    h.create("s", activation_id=activation)
    body = {"id": "s", "cron": "0 * * * *", "activation_id": activation, "notes": "hourly"}
    stale = h.api.post("/schedules", json=body, headers={"If-Match": "0"})
    assert stale.status_code == 409
    assert stale.get_json()["error"]["details"]["current_revision"] == 1
    replaced = h.api.post("/schedules", json=body, headers={"If-Match": '"1"'})
    assert replaced.status_code == 200 and replaced.headers["ETag"] == '"2"'
    data = replaced.get_json()
    assert data["revision"] == 2 and data["next_fire_at"] == "2026-01-05T13:00:00Z"
    again = h.api.post("/schedules", json=body, headers={"If-Match": "1"})
    assert again.get_json()["error"]["details"]["current_revision"] == 2
    updated = h.history("s")[-1]
    assert updated["event_type"] == "ScheduleUpdated"
    assert set(updated["payload"]) == EVENT_KEYS["ScheduleUpdated"]
    assert updated["payload"]["changed_fields"] == ["spec", "notes"]
    with h.db.session() as session:
        revisions = session.scalars(select(ScheduleRevision).order_by(ScheduleRevision.revision))
        configs = [(r.revision, r.config["spec"]["cron_expressions"]) for r in revisions]
    assert configs == [(1, ["*/5 * * * *"]), (2, ["0 * * * *"])]


def test_malformed_if_match_is_a_bad_request(h):
    h.create("s")
    # Not a revision; nor are digits other than ASCII ones (an Arabic-Indic 1 read as 1).
    for value in ("abc", "*", "\u0661", '"\u0661"'):
        response = h.api.post("/schedules/s/pause", json={}, headers={"If-Match": value})
        assert response.status_code == 400, value
        assert response.get_json()["error"]["code"] == "BAD_REQUEST"
    weak = h.api.post("/schedules/s/pause", json={}, headers={"If-Match": 'W/"1"'})
    assert weak.status_code == 200 and weak.get_json()["revision"] == 2


def test_patch_merges_into_the_current_configuration(h):
    activation = h.workflow()
    h.create("s", activation_id=activation, labels={"team": "billing", "tier": "1"})
    response = h.api.request(
        "PATCH",
        "/schedules/s",
        json={"notes": "n", "labels": {"tier": None}},
        headers={"If-Match": "1"},
    )
    assert response.status_code == 200, response.get_json()
    data = response.get_json()
    assert data["revision"] == 2 and data["notes"] == "n" and data["labels"] == {"team": "billing"}
    assert data["spec"]["cron_expressions"] == ["*/5 * * * *"]
    assert h.history("s")[-1]["payload"]["changed_fields"] == ["labels", "notes"]
    missing = h.api.request("PATCH", "/schedules/s", json={"notes": "x"})
    assert missing.status_code == 409
    assert missing.get_json()["error"]["details"]["current_revision"] == 2
    # Naming the workflow un-pins the activation.
    h.workflow("other")
    follow = h.api.request(
        "PATCH", "/schedules/s", json={"action": {"workflow": "other"}}, headers={"If-Match": "2"}
    )
    assert follow.status_code == 200, follow.get_json()
    assert follow.get_json()["action"]["activation_id"] is None
    assert follow.get_json()["action"]["workflow"] == "other"


def test_a_save_rebinds_the_principal_to_the_acting_user(h, api_for):
    h.create("s")
    other = api_for("pavel", "operator")
    body = {"id": "s", "cron": "*/5 * * * *", "activation_id": h.workflow()}
    data = h.save(body, revision=1, api=other, expect=200)
    assert data["principal"] == "pavel"


def test_a_deleted_id_is_never_reused(h):
    activation = h.workflow()
    h.create("s", activation_id=activation)
    deleted = h.api.request("DELETE", "/schedules/s", headers={"If-Match": "1"})
    assert deleted.status_code == 200 and deleted.get_json()["status"] == "deleted"
    assert deleted.get_json()["deleted_at"] == "2026-01-05T12:00:00Z"
    before = h.counts()
    body = {"id": "s", "cron": "0 * * * *", "activation_id": activation}
    for headers in ({}, {"If-Match": "2"}):
        response = h.api.post("/schedules", json=body, headers=headers)
        assert response.status_code == 409
        assert response.get_json()["error"]["code"] == "SCHEDULE_DELETED"
    for verb in ("pause", "resume", "disable", "enable", "trigger"):
        response = h.post("s", verb, revision=2)
        assert response.status_code == 409, verb
        assert response.get_json()["error"]["code"] == "SCHEDULE_DELETED"
    backfill = h.post(
        "s", "backfill", {"from": "2026-01-05T10:00:00Z", "to": "2026-01-05T11:00:00Z"}, revision=2
    )
    assert backfill.get_json()["error"]["code"] == "SCHEDULE_DELETED"
    patch = h.api.request("PATCH", "/schedules/s", json={"notes": "x"}, headers={"If-Match": "2"})
    assert patch.get_json()["error"]["code"] == "SCHEDULE_DELETED"
    assert h.counts() == before
    # A second delete is a no-op, whatever its If-Match.
    again = h.api.post("/schedules/s/delete", json={}, headers={"If-Match": "1"})
    assert again.status_code == 200 and again.get_json()["revision"] == 2
    assert h.counts() == before
    assert h.event_types("s") == ["ScheduleCreated", "ScheduleDeleted"]


def test_concurrent_saves_with_the_same_revision_exactly_one_wins(h, db_url):
    activation = h.workflow()
    h.create("s", activation_id=activation)
    apps = [make_test_app(db_url) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def save(app, notes):
        from app.context import database
        from app.db import Namespace, User

        db = database(app)
        with db.session() as session:
            namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
            user = session.scalar(select(User).where(User.username == "olga"))
            session.commit()
            body = {"id": "s", "cron": "0 * * * *", "activation_id": activation, "notes": notes}
            barrier.wait()
            try:
                service.save(
                    session,
                    h.set_clock("12:00"),
                    namespace,
                    user,
                    CommandContext("olga", "api"),
                    body,
                    1,
                )
                session.commit()
                outcomes.append("saved")
            except AlmanacError as exc:
                outcomes.append(exc.code)
        db.dispose()

    threads = [threading.Thread(target=save, args=(app, f"n{i}")) for i, app in enumerate(apps)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["SCHEDULE_REVISION", "saved"]
    data = h.read("s")
    assert data["revision"] == 2
    assert h.event_types("s") == ["ScheduleCreated", "ScheduleUpdated"]


@pytest.mark.parametrize("verb", ["pause", "disable"])
def test_pause_aliases_write_a_revision_and_an_event(h, verb):
    h.create("s")
    response = h.post("s", verb, {"reason": "maintenance"})
    assert response.status_code == 200
    data = response.get_json()
    assert data["status"] == "paused" and data["paused_reason"] == "maintenance"
    assert data["revision"] == 2 and data["next_fire_at"] is None
    assert response.headers["ETag"] == '"2"'
    event = h.history("s")[-1]
    assert event["event_type"] == "SchedulePaused"
    assert event["payload"]["reason"] == "maintenance"
    assert event["payload"]["command_context"]["reason"] == "maintenance"
    # Pausing a paused schedule changes nothing.
    assert h.post("s", verb).get_json()["revision"] == 2


def test_every_change_writes_one_immutable_revision(h):
    h.create("s")
    h.post("s", "pause", {"reason": "r"})
    h.post("s", "resume")
    h.api.request("PATCH", "/schedules/s", json={"notes": "n"}, headers={"If-Match": "3"})
    h.api.request("DELETE", "/schedules/s", headers={"If-Match": "4"})
    with h.db.session() as session:
        revisions = list(
            session.scalars(select(ScheduleRevision).order_by(ScheduleRevision.revision))
        )
    assert [(r.revision, r.config["status"]) for r in revisions] == [
        (1, "active"),
        (2, "paused"),
        (3, "active"),
        (4, "active"),
        (5, "deleted"),
    ]
    assert revisions[1].config["paused_reason"] == "r"
    assert revisions[3].config["notes"] == "n" and revisions[2].config["notes"] is None
    assert h.event_types() == [
        "ScheduleCreated",
        "SchedulePaused",
        "ScheduleResumed",
        "ScheduleUpdated",
        "ScheduleDeleted",
    ]


def test_resume_fires_from_the_resume_time_without_catch_up(h):
    h.create("s")
    h.tick("12:05")
    h.finish()
    h.set_clock("12:06")
    h.post("s", "pause")
    h.set_clock("12:31")
    resumed = h.post("s", "resume").get_json()
    assert resumed["next_fire_at"] == "2026-01-05T12:35:00Z"
    assert h.history()[-1]["payload"]["next_fire_at"] == "2026-01-05T12:35:00Z"
    assert [r["run_id"] for r in h.tick("12:35")] == ["schedule:s:20260105T123500Z"]
    # The paused half hour holds no occurrence: not started, not skipped.
    assert [(o["kind"], o["instant"][11:16]) for o in h.ledger()] == [
        ("started", "12:05"),
        ("started", "12:35"),
    ]


def test_pause_closes_the_period_at_the_pause_time(h):
    h.create("s", cron="* * * * *")
    h.set_clock("12:03:30")
    # The tick has not observed 12:01-12:03 yet: pausing accounts for them.
    h.post("s", "pause")
    ledger = h.ledger()
    assert [(o["kind"], o["instant"], o["through"], o["reason"]) for o in ledger] == [
        ("skipped", "2026-01-05T12:01:00Z", "2026-01-05T12:03:00Z", "paused")
    ]


def test_the_command_source_and_request_id_come_from_the_request(h):
    activation = h.workflow()
    h.api.post(
        "/schedules",
        json={"id": "s", "cron": "* * * * *", "activation_id": activation},
        headers={"X-Almanac-Source": "cli", "X-Request-Id": "req-42"},
    )
    context = h.history()[0]["payload"]["command_context"]
    assert context == {"actor": "olga", "source": "cli", "request_id": "req-42", "reason": None}


def test_a_request_id_keeps_the_utf8_the_client_sent_and_at_most_128_characters(h):
    activation = h.workflow()
    # A header's bytes reach the app as latin-1 text: 'réq' sent as UTF-8 arrives as 'rÃ©q'.
    sent = ("réq-Ω-" + "x" * 200).encode().decode("latin-1")
    h.api.post(
        "/schedules",
        json={"id": "s", "cron": "* * * * *", "activation_id": activation},
        headers={"X-Request-Id": sent},
    )
    revision = str(h.read()["revision"])
    pause = h.api.post(
        "/schedules/s/pause", json={}, headers={"If-Match": revision, "X-Request-Id": "\t\x7f "}
    )
    assert pause.status_code == 200, pause.get_json()
    first, second = (event["payload"]["command_context"] for event in h.history())
    assert first["request_id"] == ("réq-Ω-" + "x" * 200)[:128]
    # Nothing printable left: a generated id, as when none is sent.
    assert len(second["request_id"]) == 36 and second["request_id"].count("-") == 4


def test_concurrent_creates_of_one_id_exactly_one_wins(h, db_url):
    activation = h.workflow()
    apps = [make_test_app(db_url) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def create(app):
        from app.context import database
        from app.db import Namespace, User

        db = database(app)
        with db.session() as session:
            namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
            user = session.scalar(select(User).where(User.username == "olga"))
            session.commit()
            body = {"id": "twin", "cron": "0 * * * *", "activation_id": activation}
            barrier.wait()
            try:
                service.save(
                    session,
                    h.set_clock("12:00"),
                    namespace,
                    user,
                    CommandContext("olga", "api"),
                    body,
                    None,
                )
                session.commit()
                outcomes.append("created")
            except AlmanacError as exc:
                session.rollback()
                outcomes.append(exc.code)
        db.dispose()

    threads = [threading.Thread(target=create, args=(app,)) for app in apps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["SCHEDULE_REVISION", "created"]
    assert h.read("twin")["revision"] == 1
    assert h.event_types("twin") == ["ScheduleCreated"]


def test_a_calendar_spelled_anew_keeps_what_is_due_but_not_ticked(h):
    """`00 * * * *` fires as `0 * * * *` does: a save that only respells the calendar keeps the
    cursor, so the occurrence due but not yet ticked still fires; a real change drops it."""
    h.create("s", cron="0 * * * *", jitter_seconds=3600)
    h.set_clock("2026-01-05T13:00:01Z")  # 13:00 is due, its jittered time is later
    for revision, spelling in enumerate(("00 * * * *", "0 0-23 * * *", "0 * 1-31 * *"), 1):
        headers = {"If-Match": str(revision)}
        saved = h.api.request("PATCH", "/schedules/s", json={"cron": spelling}, headers=headers)
        assert saved.status_code == 200, saved.get_json()
        assert saved.get_json()["spec"]["cron_expressions"] == [spelling]
    assert h.ledger() == []
    due = h.read()["next_fire_at"]
    assert due.startswith("2026-01-05T13:")
    assert [row["outcome"] for row in h.tick(due)] == ["triggered"]
    assert [(row["kind"], row["instant"]) for row in h.ledger()] == [
        ("started", "2026-01-05T13:00:00Z")
    ]
    # A calendar that fires differently starts afresh: what was due under the old one is
    # accounted as skipped (`updated`).
    h.set_clock("2026-01-05T15:00:01Z")
    headers = {"If-Match": str(h.read()["revision"])}
    changed = h.api.request("PATCH", "/schedules/s", json={"cron": "30 * * * *"}, headers=headers)
    assert changed.status_code == 200
    assert [(row["kind"], row["reason"]) for row in h.ledger()][-1:] == [("skipped", "updated")]
