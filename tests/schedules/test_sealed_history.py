"""Once secret, stays secret in the audit stream: a schedule input saved in plaintext before a
version marked it secret is shown as `***` in the schedule's history (API and console)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.context import database
from app.db import Schedule, ScheduleHistoryEvent
from tests.schedules.test_save_cost import recorded
from tests.security.conftest import deploy, sign_in

TOKEN = "PlainT0kenBeforeSeal"
PIN = "PlainPinBeforeSeal-4411"
REGION = "eu-west-visible-region"
PLAIN = {"type": "object"}
MARKED = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "x-secret": True},
        "auth": {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": True}}},
        "region": {"type": "string"},
    },
}
# A later version that marks nothing: what was secret once stays hidden.
UNMARKED = {"type": "object", "properties": {"token": {"type": "string"}}}


def _saved_before_the_seal(admin_api: Any) -> None:
    """`seal-1` created and updated while `seal` v1 marked nothing, then v2 marks two paths."""
    assert deploy(admin_api, "seal", PLAIN).status_code == 201
    body = {
        "id": "seal-1",
        "cron": "0 0 1 1 *",
        "workflow": "seal",
        "input": {"token": TOKEN, "auth": {"pin": PIN}, "region": REGION},
    }
    assert admin_api.post("/schedules", json=body).status_code == 201
    change = {"notes": "before the seal", "input": body["input"] | {"note": "kept"}}
    updated = admin_api.request(
        "PATCH", "/schedules/seal-1", json=change, headers={"If-Match": "1"}
    )
    assert updated.status_code == 200, updated.get_json()
    assert deploy(admin_api, "seal", MARKED).status_code == 201
    assert deploy(admin_api, "seal", UNMARKED).status_code == 201


def _inputs(events: list[dict[str, Any]]) -> list[Any]:
    return [e["payload"]["action"]["input"] for e in events if "action" in e["payload"]]


def test_api_history_masks_what_a_later_version_marks_secret(app, admin_api):
    _saved_before_the_seal(admin_api)
    response = admin_api.get("/schedules/seal-1/history")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert TOKEN not in text and PIN not in text
    events = response.get_json()["events"]
    assert [e["event_type"] for e in events] == ["ScheduleCreated", "ScheduleUpdated"]
    masked = {"token": "***", "auth": {"pin": "***"}, "region": REGION}
    assert _inputs(events) == [masked, masked | {"note": "kept"}]
    # Paged one event at a time, each page is masked as well.
    second = admin_api.get("/schedules/seal-1/history?limit=1&after_sequence=1")
    assert second.status_code == 200 and TOKEN not in second.get_data(as_text=True)
    assert _inputs(second.get_json()["events"]) == [masked | {"note": "kept"}]
    # The stored rows keep what was saved then: they are masked when shown.
    with database(app).session() as session:
        payloads = session.scalars(
            select(ScheduleHistoryEvent.payload)
            .join(Schedule, Schedule.id == ScheduleHistoryEvent.schedule_pk)
            .where(Schedule.schedule_id == "seal-1")
        ).all()
    assert {p["action"]["input"]["token"] for p in payloads} == {TOKEN}


def test_console_history_masks_what_a_later_version_marks_secret(client, admin, admin_api):
    _saved_before_the_seal(admin_api)
    sign_in(client, admin.username, admin.password)
    for headers in ({}, {"HX-Request": "true"}):
        for query in ("", "?latest=1", "?after_sequence=1"):
            page = client.get(f"/ns/default/schedules/seal-1/history{query}", headers=headers)
            assert page.status_code == 200, query
            html = page.get_data(as_text=True)
            assert TOKEN not in html and PIN not in html, (query, headers)
            assert "***" in html and REGION in html, (query, headers)


def test_history_of_a_workflow_never_marked_secret_is_shown_as_saved(admin_api):
    assert deploy(admin_api, "open", PLAIN).status_code == 201
    body = {"id": "open-1", "cron": "0 0 1 1 *", "workflow": "open", "input": {"token": TOKEN}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    # Another workflow marking `token` secret does not hide this schedule's input.
    assert deploy(admin_api, "seal", MARKED).status_code == 201
    events = admin_api.get("/schedules/open-1/history").get_json()["events"]
    assert _inputs(events) == [{"token": TOKEN}]


def test_events_of_a_workflow_the_schedule_left_are_masked_by_that_workflow(admin_api):
    # One created naming `legacy`, one pinned to an activation of it; both then move to `other`.
    assert deploy(admin_api, "legacy", PLAIN).status_code == 201
    assert deploy(admin_api, "other", PLAIN).status_code == 201
    pinned = admin_api.post("/activations", json={"workflow": "legacy"}).get_json()["id"]
    for schedule_id, action in (
        ("named", {"workflow": "legacy"}),
        ("pinned", {"activation_id": pinned}),
    ):
        body = {"id": schedule_id, "cron": "0 0 1 1 *", "input": {"token": TOKEN}} | action
        assert admin_api.post("/schedules", json=body).status_code == 201, body
        move = {"action": {"workflow": "other", "input": {"token": None, "region": REGION}}}
        moved = admin_api.request(
            "PATCH", f"/schedules/{schedule_id}", json=move, headers={"If-Match": "1"}
        )
        assert moved.status_code == 200, moved.get_json()
    assert deploy(admin_api, "legacy", MARKED).status_code == 201
    for schedule_id in ("named", "pinned"):
        response = admin_api.get(f"/schedules/{schedule_id}/history")
        assert TOKEN not in response.get_data(as_text=True), schedule_id
        assert _inputs(response.get_json()["events"]) == [{"token": "***"}, {"region": REGION}]


def test_a_history_page_reads_the_workflow_versions_once(app, admin_api):
    _saved_before_the_seal(admin_api)
    for revision in range(2, 7):
        change = {"notes": f"save {revision}"}
        saved = admin_api.request(
            "PATCH", "/schedules/seal-1", json=change, headers={"If-Match": str(revision)}
        )
        assert saved.status_code == 200, saved.get_json()
    with recorded(app) as seen:
        response = admin_api.get("/schedules/seal-1/history")
    assert len(response.get_json()["events"]) == 7 and TOKEN not in response.get_data(as_text=True)
    assert len([s for s in seen["statements"] if "workflow_versions" in s]) == 1, seen


def test_each_event_is_masked_by_the_workflow_it_names_only(admin_api):
    """A schedule created on a workflow that never marked `token` and moved to one that does:
    its creation event shows the value as saved (every event was masked by every workflow the
    page named)."""
    assert deploy(admin_api, "plain", PLAIN).status_code == 201
    assert deploy(admin_api, "seal", MARKED).status_code == 201
    body = {"id": "moved", "cron": "0 0 1 1 *", "workflow": "plain", "input": {"token": TOKEN}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    change = {"workflow": "seal", "input": {"token": TOKEN}}
    moved = admin_api.request("PATCH", "/schedules/moved", json=change, headers={"If-Match": "1"})
    assert moved.status_code == 200, moved.get_json()
    events = admin_api.get("/schedules/moved/history").get_json()["events"]
    assert _inputs(events) == [{"token": TOKEN}, {"token": "***"}]
