"""Console schedule pages through the Flask client: list, detail, forms, actions, history."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.context import clock, database
from app.db import Schedule, ScheduleHistoryEvent
from tests.conftest import FIXED_NOW
from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from, sign_in


@pytest.fixture
def operator(client, accounts, app):
    account = accounts.create("olga", role="operator")
    seed_workflow(app)
    sign_in(client, "olga", account.password)
    return account


def make_schedule(api, schedule_id="nightly", **extra):
    body = {
        "schedule_id": schedule_id,
        "spec": {"cron_expressions": ["30 2 * * *"], "timezone": "America/New_York"},
        "action": {"workflow": "invoice-sync"},
    } | extra
    response = api.post("/schedules", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def count(app, model):
    with database(app).session() as session:
        return session.scalar(select(func.count()).select_from(model))


def test_list_shows_schedule_with_next_due_and_partial_refresh(client, operator, api_for):
    api = api_for("apiuser")
    make_schedule(api, labels={"team": "billing"})
    page = client.get("/ns/default/schedules")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "nightly" in text and "invoice-sync" in text and "team:billing" in text
    assert "2026-01-06 07:30:00 UTC" in text  # next due, absolute
    assert 'hx-trigger="every 5s"' in text
    rows = client.get("/ns/default/schedules?label=team:billing", headers={"HX-Request": "true"})
    assert "<html" not in rows.get_data(as_text=True) and "nightly" in rows.get_data(as_text=True)
    assert "HX-Request" in rows.headers["Vary"]
    none = client.get("/ns/default/schedules?label=team:other", headers={"HX-Request": "true"})
    assert "nightly" not in none.get_data(as_text=True)


def test_create_through_form_with_field_error_then_success(client, operator, app):
    form = client.get("/ns/default/schedules/new")
    token = csrf_from(form)
    before = count(app, Schedule)
    bad = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "daily",
            "cron_expressions": "0 0 * * 7",
            "timezone": "UTC",
            "workflow": "invoice-sync",
            "input": "{}",
        },
    )
    assert bad.status_code == 422
    html = bad.get_data(as_text=True)
    assert re.search(r'id="err-cron_expressions"[^>]*>[^<]*day of week', html), html[:3000]
    assert count(app, Schedule) == before
    bad_json = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "cron_expressions": "0 2 * * *",
            "workflow": "invoice-sync",
            "input": "{oops",
        },
    )
    assert bad_json.status_code == 422
    assert 'id="err-input"' in bad_json.get_data(as_text=True)
    good = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "daily",
            "cron_expressions": "0 2 * * *",
            "timezone": "Europe/Berlin",
            "workflow": "invoice-sync",
            "input": '{"a": 1}',
            "labels": "team=billing",
            "overlap_policy": "buffer_one",
            "missed_policy": "skip",
        },
    )
    assert good.status_code == 302, good.get_data(as_text=True)[:2000]
    detail = client.get(good.headers["Location"]).get_data(as_text=True)
    assert "daily" in detail and "buffer one" in detail and "Europe/Berlin" in detail
    # The id is taken now: the id field says so (not an If-Match message), nothing is written.
    before = count(app, Schedule)
    again = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "daily",
            "cron_expressions": "0 9 * * 1-5",
            "workflow": "invoice-sync",
            "input": "{}",
        },
    )
    assert again.status_code == 422
    html = again.get_data(as_text=True)
    assert re.search(r'id="err-schedule_id"[^>]*>[^<]*already exists', html), html[:3000]
    assert "If-Match" not in html and ">0 9 * * 1-5</textarea>" in html
    assert count(app, Schedule) == before


def test_creating_a_schedule_with_a_deleted_schedules_id_names_the_id_field(
    client, operator, api_for, app
):
    api = api_for("apiuser")
    make_schedule(api, "gone")
    assert api.request("DELETE", "/schedules/gone", headers={"If-Match": "1"}).status_code == 200
    token = csrf_from(client.get("/ns/default/schedules/new"))
    before = count(app, Schedule)
    refused = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "gone",
            "cron_expressions": "0 2 * * *",
            "workflow": "invoice-sync",
            "input": "{}",
        },
    )
    assert refused.status_code == 422
    html = refused.get_data(as_text=True)
    assert re.search(r'id="err-schedule_id"[^>]*>[^<]*never reused', html), html[:3000]
    assert count(app, Schedule) == before


def test_live_preview_shows_dst_note_and_errors(client, operator):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    response = client.post(
        "/ns/default/calendar/preview",
        headers={"HX-Request": "true"},
        data={
            "csrf_token": token,
            "cron_expressions": "30 2 * * *",
            "timezone": "America/New_York",
            "start_at": "2026-03-07T00:00:00Z",
        },
    )
    html = response.get_data(as_text=True)
    assert "2026-03-08 07:00:00 UTC" in html and "does not exist" in html
    response = client.post(
        "/ns/default/calendar/preview",
        headers={"HX-Request": "true"},
        data={"csrf_token": token, "cron_expressions": "61 * * * *"},
    )
    assert "minute" in response.get_data(as_text=True)
    assert (
        client.post(
            "/ns/default/calendar/preview", data={"cron_expressions": "* * * * *"}
        ).status_code
        == 400
    )  # no CSRF token


def test_pause_resume_trigger_delete(client, operator, api_for, app):
    api = api_for("apiuser")
    make_schedule(api)
    page = client.get("/ns/default/schedules/nightly")
    token = csrf_from(page)
    assert 'maxlength="1024"' in page.get_data(as_text=True)
    # A reason longer than the API takes is refused whole, as there, never cut: nothing written.
    long = client.post(
        "/ns/default/schedules/nightly/pause",
        data={"csrf_token": token, "revision": "1", "reason": "x" * 1025},
        follow_redirects=True,
    )
    assert "at most 1024 characters" in long.get_data(as_text=True)
    assert api.get("/schedules/nightly").get_json()["status"] == "active"
    response = client.post(
        "/ns/default/schedules/nightly/pause",
        data={"csrf_token": token, "revision": "1", "reason": "maintenance"},
    )
    assert response.status_code == 302
    detail = client.get("/ns/default/schedules/nightly").get_data(as_text=True)
    assert "paused" in detail and "maintenance" in detail
    client.post("/ns/default/schedules/nightly/resume", data={"csrf_token": token, "revision": "2"})
    assert api.get("/schedules/nightly").get_json()["status"] == "active"
    result = client.post(
        "/ns/default/schedules/nightly/trigger",
        data={"csrf_token": token},
        headers={"HX-Request": "true"},
    )
    assert "schedule:nightly:manual:" in result.get_data(as_text=True)
    # The result links to the run it started, and the link opens it.
    link = re.search(r'<a href="([^"]+)">Open the run</a>', result.get_data(as_text=True))
    assert link and link.group(1).startswith("/ns/default/runs/schedule:nightly:manual:"), link
    opened = client.get(link.group(1))
    # A second trigger while that run is active is skipped, said in words.
    moments = iter(range(1, 10))

    def trigger_later(schedule_id: str) -> str:
        with database(app).session() as session:
            clock(app).set(session, FIXED_NOW + timedelta(seconds=next(moments)))
            session.commit()
        return client.post(
            f"/ns/default/schedules/{schedule_id}/trigger",
            data={"csrf_token": token},
            headers={"HX-Request": "true"},
        ).get_data(as_text=True)

    again = trigger_later("nightly")
    assert "skipped: skipped by the overlap policy" in again and "flash-error" in again
    make_schedule(api, "buffered", overlap_policy="buffer_one")
    for expected in ("triggered: run", "buffered: it starts once the schedule"):
        answer = trigger_later("buffered")
        assert expected in answer and "flash-ok" in answer, answer
    assert opened.status_code == 200 and "schedule:nightly:manual:" in opened.get_data(as_text=True)
    stale = client.post(
        "/ns/default/schedules/nightly/delete",
        data={"csrf_token": token, "revision": "1"},
        follow_redirects=True,
    )
    assert "Someone else changed nightly" in stale.get_data(as_text=True)
    deleted = client.post(
        "/ns/default/schedules/nightly/delete", data={"csrf_token": token, "revision": "3"}
    )
    assert deleted.status_code == 302
    assert api.get("/schedules/nightly").get_json()["status"] == "deleted"
    assert client.get("/ns/default/schedules/nightly/history").status_code == 200


def test_history_modal_pages_with_load_more(client, operator, api_for, app):
    api = api_for("apiuser")
    make_schedule(api)
    revision = 1
    for _ in range(60):  # 120 more events: pause + resume
        for verb in ("pause", "resume"):
            response = api.post(
                f"/schedules/nightly/{verb}", json={}, headers={"If-Match": str(revision)}
            )
            assert response.status_code == 200, response.get_json()
            revision += 1
    first = client.get("/ns/default/schedules/nightly/history", headers={"HX-Request": "true"})
    html = first.get_data(as_text=True)
    assert html.count('class="event"') == 100 and "Load more" in html
    assert "after_sequence=100" in html
    second = client.get(
        "/ns/default/schedules/nightly/history?after_sequence=100", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    assert second.count('class="event"') == 21
    assert 'hx-swap-oob="true"' in second and "Load more" not in second


def test_viewer_sees_no_mutating_control_and_gets_403(client, accounts, app, api_for):
    api = api_for("apiuser")
    seed_workflow(app)
    make_schedule(api)
    viewer = accounts.create("vera", role="viewer")
    sign_in(client, "vera", viewer.password)
    listing = client.get("/ns/default/schedules").get_data(as_text=True)
    assert "New schedule" not in listing
    detail = client.get("/ns/default/schedules/nightly")
    html = detail.get_data(as_text=True)
    for control in ("Pause", "Trigger now", "Delete", "Edit", "Backfill"):
        assert f">{control}<" not in html, control
    token = csrf_from(detail)
    for path in ("pause", "resume", "trigger", "delete", "backfill", "edit"):
        response = client.post(
            f"/ns/default/schedules/nightly/{path}", data={"csrf_token": token, "revision": "1"}
        )
        assert response.status_code == 403, path
    assert client.get("/ns/default/schedules/new").status_code == 403


def test_script_in_notes_labels_and_payloads_is_inert(client, operator, api_for, app):
    evil = "<script>alert(1)</script>"
    make_schedule(api_for("apiuser"), notes=evil, labels={"x": evil}, memo={"m": evil})
    for path in ("/ns/default/schedules", "/ns/default/schedules/nightly"):
        html = client.get(path).get_data(as_text=True)
        assert evil not in html and "&lt;script&gt;" in html
    history = client.get("/ns/default/schedules/nightly/history", headers={"HX-Request": "true"})
    assert evil not in history.get_data(as_text=True)
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(ScheduleHistoryEvent)) >= 1


def filter_form_fields(html: str) -> dict[str, str]:
    """The fields the schedules list's Filter button submits, as a browser would send them."""
    form = re.search(r'<form id="schedule-filters".*?</form>', html, re.S)
    assert form, html[:2000]
    fields = {}
    for tag in re.findall(r"<(?:input|select)\b[^>]*>", form.group(0)):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name and "<select" not in tag:
            fields[name.group(1)] = value.group(1) if value else ""
        elif name:
            fields[name.group(1)] = ""
    return fields


def test_filtering_from_the_second_page_starts_from_the_first(client, operator, api_for):
    api = api_for("apiuser")
    for index in range(55):
        make_schedule(api, f"bulk-{index:02d}")
    first = client.get("/ns/default/schedules").get_data(as_text=True)
    next_link = re.search(r'href="(/ns/default/schedules\?[^"]*cursor=[^"]+)"', first)
    assert next_link, "a next-page link"
    second = client.get(next_link.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert "bulk-00" in second and "bulk-50" not in second  # newest first
    fields = filter_form_fields(second) | {"q": "bulk-50"}
    found = client.get("/ns/default/schedules", query_string=fields).get_data(as_text=True)
    assert 'data-schedule="bulk-50"' in found and "No schedules match" not in found
    # The live refresh reads the page the reader is on, with the filter it was made with, and
    # includes nothing of the filter form (what is typed there applies on Filter only).
    refresh = re.search(r'<tbody id="schedule-rows" hx-get="([^"]+)"([^>]*)>', second)
    assert refresh and "hx-include" not in refresh.group(2)
    cursor = re.search(r"cursor=([^&]+)", next_link.group(1).replace("&amp;", "&")).group(1)
    assert refresh.group(1).replace("&amp;", "&") == f"/ns/default/schedules?cursor={cursor}"
    rows = client.get(refresh.group(1).replace("&amp;", "&"), headers={"HX-Request": "true"})
    assert 'data-schedule="bulk-00"' in rows.get_data(as_text=True)
    assert 'data-schedule="bulk-50"' not in rows.get_data(as_text=True)
    filtered = client.get("/ns/default/schedules?q=bulk-1&status=active").get_data(as_text=True)
    assert 'hx-get="/ns/default/schedules?q=bulk-1&amp;status=active"' in filtered
    # The cursor is bound to the filter it was made with: under another one it is refused
    # (400) instead of starting that list at a position it never held.
    other = client.get(f"/ns/default/schedules?q=bulk&cursor={cursor}")
    assert other.status_code == 400
    assert "other filters" in other.get_data(as_text=True)
