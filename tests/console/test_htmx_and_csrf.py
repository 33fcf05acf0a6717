"""Every htmx endpoint answers its partial with HX-Request and the page without; every console
POST is refused without a CSRF token; backfill counts before it starts anything."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.ticker.tick import run_tick
from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from, sign_in
from tests.console.test_run_pages import TASK_STEPS


@pytest.fixture
def seeded(app, client, accounts, api_for):
    api = api_for("starter")
    seed_workflow(app)
    seed_workflow(app, "review", steps=TASK_STEPS)
    body = {
        "schedule_id": "nightly",
        "cron": "0 2 * * *",
        "overlap_policy": "allow_all",
        "action": {"workflow": "invoice-sync"},
    }
    assert api.post("/schedules", json=body).status_code == 201
    assert api.post("/runs", json={"workflow": "review", "run_id": "r-1"}).status_code == 201
    run_tick(app, work=True)
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    return api


PARTIALS = [
    "/ns/default/schedules",
    "/ns/default/schedules/nightly",
    "/ns/default/schedules/nightly/history",
    "/ns/default/schedules/nightly/history?after_sequence=0",
    "/ns/default/runs",
    "/ns/default/runs/r-1",
    "/ns/default/tasks",
]


@pytest.mark.parametrize("path", PARTIALS)
def test_partial_with_hx_request_full_page_without(seeded, client, path):
    full = client.get(path)
    partial = client.get(path, headers={"HX-Request": "true"})
    assert full.status_code == partial.status_code == 200
    assert b"<html" in full.data and b"<html" not in partial.data
    assert len(partial.data) < len(full.data)
    for response in (full, partial):
        assert "HX-Request" in response.headers["Vary"]


POSTS = [
    "/ns/default/schedules/new",
    "/ns/default/schedules/nightly/edit",
    "/ns/default/schedules/nightly/pause",
    "/ns/default/schedules/nightly/resume",
    "/ns/default/schedules/nightly/trigger",
    "/ns/default/schedules/nightly/delete",
    "/ns/default/schedules/nightly/backfill",
    "/ns/default/calendar/preview",
    "/ns/default/runs/r-1/signal",
    "/ns/default/runs/r-1/cancel",
    "/ns/default/runs/r-1/terminate",
    "/ns/default/tasks/any/complete",
    "/logout",
]


@pytest.mark.parametrize("path", POSTS)
def test_posts_without_csrf_token_are_refused(seeded, client, path):
    before = seeded.get("/schedules/nightly").get_json()
    response = client.post(path, data={"revision": "1", "name": "x"})
    assert response.status_code == 400, path
    # An htmx action is told to reload its page (an error page swapped in would show nothing).
    swapped = client.post(path, data={"revision": "1", "name": "x"}, headers={"HX-Request": "true"})
    assert swapped.status_code == 204 and swapped.headers["HX-Refresh"] == "true", path
    assert seeded.get("/schedules/nightly").get_json() == before
    if path != "/logout":
        assert "The form was not accepted" in client.get("/ns/default/schedules").get_data(
            as_text=True
        )


def test_backfill_counts_then_starts(seeded, client, app):
    page = client.get("/ns/default/schedules/nightly")
    count = client.get(
        "/ns/default/schedules/nightly/backfill/count?from=2026-01-01T00:00:00Z"
        "&to=2026-01-04T00:00:00Z",
        headers={"HX-Request": "true"},
    )
    assert "This range holds 3 occurrences" in count.get_data(as_text=True)
    bad = client.get("/ns/default/schedules/nightly/backfill/count?from=x&to=y")
    assert bad.get_data(as_text=True).startswith("From: ")  # named as the form labels it

    def backfill(start: str, end: str) -> Any:
        form = {"csrf_token": csrf_from(page), "from": start, "to": end}
        path = "/ns/default/schedules/nightly/backfill"
        return client.post(path, headers={"HX-Request": "true"}, data=form)

    result = backfill("2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z")
    assert "Backfill started 3 runs" in result.get_data(as_text=True)
    # The schedule page reads its counters, ledger and runs again.
    assert result.headers["HX-Trigger"] == "schedule-changed"
    detail = client.get("/ns/default/schedules/nightly", headers={"HX-Request": "true"})
    refreshed = detail.get_data(as_text=True)
    assert 'hx-trigger="schedule-changed from:body"' in refreshed
    assert "schedule:nightly:backfill:20260101T020000Z" in refreshed.split('id="schedule-runs"')[1]
    one = backfill("2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z")
    # It said "Backfill started 1 runs".
    assert "Backfill started 1 run, skipped 0, 0 already started." in one.get_data(as_text=True)
    runs = seeded.get("/runs?schedule_id=nightly").get_json()["items"]
    assert sorted(r["run_id"] for r in runs) == [
        "schedule:nightly:backfill:20260101T020000Z",
        "schedule:nightly:backfill:20260102T020000Z",
        "schedule:nightly:backfill:20260103T020000Z",
        "schedule:nightly:backfill:20260104T020000Z",
    ]


def test_a_live_refresh_after_the_session_ended_navigates_to_sign_in(seeded, client):
    page = "http://localhost/ns/default/schedules?status=active"
    assert client.get("/ns/default/schedules", headers={"HX-Request": "true"}).status_code == 200
    signed_in = client.get("/ns/default/schedules")
    assert client.post("/logout", data={"csrf_token": csrf_from(signed_in)}).status_code == 302
    # The polling table asks again: htmx must navigate, never swap the login page into it.
    refresh = client.get(
        "/ns/default/schedules", headers={"HX-Request": "true", "HX-Current-URL": page}
    )
    assert refresh.status_code == 204 and refresh.data == b""
    target = "/login?next=%2Fns%2Fdefault%2Fschedules%3Fstatus%3Dactive"
    assert refresh.headers["HX-Redirect"] == target
    plain = client.get("/ns/default/runs?status=failed")
    assert plain.status_code == 302
    assert plain.headers["Location"] == "/login?next=%2Fns%2Fdefault%2Fruns%3Fstatus%3Dfailed"
    landing = client.get("/login?next=%2Fns%2Fdefault%2Fschedules").get_data(as_text=True)
    assert "Please sign in." in landing


def test_a_form_posted_after_sign_out_elsewhere_signs_in_back_to_its_page(seeded, client):
    # The form's action URL answers only POST: sign-in used to come back to it (405, or 404 for
    # a run's resolve/cancel), and a form whose token died with the session showed a 400 page.
    page = client.get("/ns/default/schedules/nightly")
    token = csrf_from(page)
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    referer = {"Referer": "http://localhost/ns/default/schedules/nightly"}
    paused = client.post(
        "/ns/default/schedules/nightly/pause",
        data={"csrf_token": token, "reason": "typed"},
        headers=referer,
    )
    assert paused.status_code == 302
    assert paused.headers["Location"] == "/login?next=%2Fns%2Fdefault%2Fschedules%2Fnightly"
    # A signed-out browser with a fresh token (the login page's) is sent back the same way.
    fresh = csrf_from(client.get("/login"))
    again = client.post(
        "/ns/default/schedules/nightly/pause", data={"csrf_token": fresh}, headers=referer
    )
    assert again.headers["Location"] == "/login?next=%2Fns%2Fdefault%2Fschedules%2Fnightly"
    # Nothing was paused.
    assert seeded.get("/schedules/nightly").get_json()["status"] == "active"
    # Without a referrer from this site: the console's home.
    elsewhere = client.post(
        "/ns/default/schedules/nightly/pause",
        data={"csrf_token": fresh},
        headers={"Referer": "https://evil.example/x"},
    )
    assert elsewhere.headers["Location"] == "/login?next=%2F"


def test_a_second_tabs_sign_in_after_the_first_signed_in_goes_where_it_was_going(
    seeded, client, accounts
):
    stale = csrf_from(client.get("/login"))
    account = accounts.create("ivan", role="viewer")
    sign_in(client, "ivan", account.password)
    second = client.post(
        "/login",
        data={
            "username": "ivan",
            "password": account.password,
            "csrf_token": stale,
            "next": "/ns/default/runs",
        },
    )
    assert second.status_code == 302 and second.headers["Location"] == "/ns/default/runs"
    assert client.get("/ns/default/runs").status_code == 200


def test_a_background_preview_after_the_session_ended_keeps_the_form(seeded, client, accounts):
    # The form's previews are sent by htmx as someone types: a redirect to sign-in (session
    # ended) or a reload (stale token) threw away everything typed.
    form_page = client.get("/ns/default/schedules/new")
    token = csrf_from(form_page)
    typed = {"csrf_token": token, "cron_expressions": "0 9 * * *", "timezone": "UTC"}
    htmx = {"HX-Request": "true", "HX-Current-URL": "http://localhost/ns/default/schedules/new"}
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    for path in ("/ns/default/calendar/preview", "/ns/default/schedules/simulate-form"):
        paused = client.post(path, data=typed, headers=htmx)
        assert paused.status_code == 200 and "HX-Redirect" not in paused.headers, path
        assert "HX-Refresh" not in paused.headers
        text = paused.get_data(as_text=True)
        assert "What you typed is kept" in text and 'target="_blank"' in text
        assert "next=/ns/default/schedules/new" in text
    # Signed in again (in another tab): the old token is stale; the preview renews it in place.
    account = accounts.create("pia", role="operator")
    sign_in(client, "pia", account.password)
    renewed = client.post("/ns/default/schedules/simulate-form", data=typed, headers=htmx)
    assert renewed.status_code == 200 and "HX-Refresh" not in renewed.headers
    fresh = re.search(r'data-fresh-csrf="([^"]+)"', renewed.get_data(as_text=True))
    assert fresh and fresh.group(1) != token
    # With the renewed token the form saves.
    body = {
        "csrf_token": fresh.group(1),
        "schedule_id": "typed-before",
        "cron_expressions": "0 9 * * *",
        "timezone": "UTC",
        "workflow": "invoice-sync",
        "input": "{}",
        "overlap_policy": "skip",
        "missed_policy": "skip",
    }
    saved = client.post("/ns/default/schedules/new", data=body)
    assert saved.status_code == 302, saved.get_data(as_text=True)[:500]
    assert seeded.get("/schedules/typed-before").status_code == 200


def test_the_schedule_pages_previews_pause_in_place_after_the_session_ended(seeded, client):
    # The backfill count paused in place, promising to keep what was typed; the simulation
    # panel beside it sent the whole tab to sign-in, and the backfill's From came back empty.
    page = "http://localhost/ns/default/schedules/nightly"
    token = csrf_from(client.get("/ns/default/schedules/nightly"))
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    htmx = {"HX-Request": "true", "HX-Current-URL": page}
    for path in (
        "/ns/default/schedules/nightly/backfill/count?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z",
        "/ns/default/schedules/nightly/simulate?horizon=24h&minutes=30",
    ):
        paused = client.get(path, headers=htmx)
        assert paused.status_code == 200 and "HX-Redirect" not in paused.headers, path
        text = paused.get_data(as_text=True)
        assert "Your session ended, so the preview is paused." in text, path
        assert "What you typed is kept" in text and 'target="_blank"' in text
        assert "next=/ns/default/schedules/nightly" in text
    # Opened as a page of its own (no script), the simulation still goes to sign in.
    plain = client.get("/ns/default/schedules/nightly/simulate?minutes=30")
    assert plain.status_code == 302 and plain.headers["Location"].startswith("/login?next=")


def test_a_plain_form_stale_after_signing_in_elsewhere_goes_back_to_its_page(
    seeded, client, accounts
):
    # It was a 400 page at the action's URL, whose "reload" posted the stale token again and
    # whose time switch pointed at that POST-only URL (405).
    page = client.get("/ns/default/schedules/nightly")
    stale = csrf_from(page)
    account = accounts.create("nia", role="operator")
    sign_in(client, "nia", account.password)  # another tab signed in again
    referer = {"Referer": "http://localhost/ns/default/schedules/nightly"}
    paused = client.post(
        "/ns/default/schedules/nightly/pause",
        data={"csrf_token": stale, "reason": "x"},
        headers=referer,
    )
    assert paused.status_code == 302
    assert paused.headers["Location"] == "/ns/default/schedules/nightly"
    landed = client.get("/ns/default/schedules/nightly").get_data(as_text=True)
    assert "The form could not be verified, so nothing was done" in landed
    assert seeded.get("/schedules/nightly").get_json()["status"] == "active"
    # An error page answered to a POST: its time switch points at the page the form was on.
    refused = client.post(
        "/ns/no-such-namespace/schedules/nightly/pause",
        data={"csrf_token": csrf_from(client.get("/ns/default/schedules/nightly"))},
        headers=referer,
    )
    assert refused.status_code == 404
    assert 'name="next" value="/ns/default/schedules/nightly"' in refused.get_data(as_text=True)


def test_a_refused_form_says_what_is_known_once(seeded, client):
    # A wrong token claimed "you signed in again since this page was loaded" (nobody had); a
    # missing one showed its sentence twice; a pause without its revision claimed that someone
    # else had changed the schedule.
    page = client.get("/ns/default/schedules/nightly")
    referer = {"Referer": "http://localhost/ns/default/schedules/nightly"}
    pause = "/ns/default/schedules/nightly/pause"
    forged = client.post(pause, data={"csrf_token": "IjAwMDAi.forged.token"}, headers=referer)
    assert forged.headers["Location"] == "/ns/default/schedules/nightly"
    landed = client.get("/ns/default/schedules/nightly").get_data(as_text=True)
    assert "The form could not be verified, so nothing was done" in landed
    assert "signed in again" not in landed

    htmx = {"HX-Request": "true", **referer}
    for _ in range(2):  # two actions in flight, both without a token
        assert client.post(pause, data={}, headers=htmx).headers["HX-Refresh"] == "true"
    missing = client.post(pause, data={}, headers=referer)
    assert missing.status_code == 400
    text = missing.get_data(as_text=True)
    assert text.count("The CSRF token is missing.") == 1, text
    assert (
        client.get("/ns/default/schedules/nightly")
        .get_data(as_text=True)
        .count("The CSRF token is missing.")
        == 0
    )

    no_revision = client.post(
        pause, data={"csrf_token": csrf_from(page)}, headers=referer, follow_redirects=True
    ).get_data(as_text=True)
    assert "The form did not say which revision of nightly it was loaded at" in no_revision
    assert "Someone else changed" not in no_revision
    assert seeded.get("/schedules/nightly").get_json()["status"] == "active"
