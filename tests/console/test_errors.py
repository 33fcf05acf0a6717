"""The console's one error policy: refused actions go back with the reason (or show it in place),
nothing is written; refusals before the namespace opens, and reads, get the error page."""

from __future__ import annotations

import pytest

from app.console import schedules as schedule_pages
from app.ticker.tick import run_tick
from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from, sign_in
from tests.console.test_run_pages import SIGNAL_STEPS, start
from tests.console.test_schedule_pages import make_schedule


@pytest.fixture
def operator(client, accounts, app):
    account = accounts.create("olga", role="operator")
    seed_workflow(app)
    sign_in(client, "olga", account.password)
    return account


def test_stale_delete_over_htmx_navigates_back_and_writes_nothing(client, operator, api_for):
    api = api_for("apiuser")
    make_schedule(api)
    token = csrf_from(client.get("/ns/default/schedules/nightly"))
    api.post("/schedules/nightly/pause", json={}, headers={"If-Match": "1"})
    stale = client.post(
        "/ns/default/schedules/nightly/delete",
        data={"csrf_token": token, "revision": "1"},
        headers={"HX-Request": "true"},
    )
    assert stale.status_code == 204
    assert stale.headers["HX-Redirect"] == "/ns/default/schedules/nightly"
    assert api.get("/schedules/nightly").get_json()["status"] == "paused"
    page = client.get("/ns/default/schedules/nightly").get_data(as_text=True)
    assert "Someone else changed nightly (now revision 2)" in page


def test_backfill_refusal_shows_in_place_for_htmx_and_flashes_otherwise(client, operator, api_for):
    make_schedule(api_for("apiuser"))
    token = csrf_from(client.get("/ns/default/schedules/nightly"))
    form = {"csrf_token": token, "from": "not a time", "to": "2026-01-02T00:00:00Z"}
    swapped = client.post(
        "/ns/default/schedules/nightly/backfill", data=form, headers={"HX-Request": "true"}
    )
    html = swapped.get_data(as_text=True)
    assert swapped.status_code == 200 and "HX-Request" in swapped.headers["Vary"]
    assert "flash-error" in html and html.strip().startswith("<p") and "from:" in html
    plain = client.post("/ns/default/schedules/nightly/backfill", data=form)
    assert plain.status_code == 302
    assert plain.headers["Location"] == "/ns/default/schedules/nightly"
    shown = client.get("/ns/default/schedules/nightly").get_data(as_text=True)
    assert "flash-error" in shown and "from:" in shown


def test_bad_json_signal_goes_back_to_the_run_with_the_reason(app, client, operator, api_for):
    api = api_for("starter")
    seed_workflow(app, "approval", steps=SIGNAL_STEPS)
    start(api, "approval", "approve-9")
    run_tick(app, work=True)
    token = csrf_from(client.get("/ns/default/runs/approve-9"))
    response = client.post(
        "/ns/default/runs/approve-9/signal",
        data={"csrf_token": token, "name": "approve", "payload": "{not json"},
        follow_redirects=True,
    )
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "payload is not valid JSON" in html
    assert api.get("/runs/approve-9").get_json()["status"] == "waiting"
    # What was typed is back in the form, to be corrected rather than typed again; once.
    assert 'id="signal-name" name="name" required maxlength="128" value="approve"' in html
    assert ">{not json</textarea>" in html
    again = client.get("/ns/default/runs/approve-9").get_data(as_text=True)
    assert "{not json" not in again and 'value="approve"' not in again


def test_refusals_before_the_namespace_opens_get_the_error_page(client, operator, api_for):
    make_schedule(api_for("apiuser"))
    token = csrf_from(client.get("/ns/default/schedules/nightly"))
    missing = client.post("/ns/nowhere/schedules/nightly/pause", data={"csrf_token": token})
    assert missing.status_code == 404
    assert "Error 404" in missing.get_data(as_text=True)
    assert "namespace &#39;nowhere&#39; does not exist" in missing.get_data(as_text=True)
    unknown = client.get("/ns/default/schedules/ghost")
    assert unknown.status_code == 404 and "schedule &#39;ghost&#39; does not exist" in (
        unknown.get_data(as_text=True)
    )


def test_unexpected_errors_are_an_html_page_in_the_console_and_json_in_the_api(
    client, operator, api_for, monkeypatch
):
    api = api_for("apiuser")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(schedule_pages.queries, "list_schedules", broken)
    page = client.get("/ns/default/schedules")
    assert page.status_code == 500 and "Internal error" in page.get_data(as_text=True)
    assert "boom" not in page.get_data(as_text=True)
    listing = api.get("/schedules")
    assert listing.status_code == 500
    assert listing.get_json()["error"]["code"] == "INTERNAL"
    assert "boom" not in listing.get_data(as_text=True)
    lost = api.get("/no-such-thing")
    assert lost.status_code == 404 and lost.get_json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/no-such-page").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/ns/default/runs?status=bogus",
        "/ns/default/runs?status=failed&status=bogus",
        "/ns/default/incidents?status=bogus",
        "/ns/default/tasks?status=bogus",
    ],
)
def test_a_bad_status_filter_is_named_not_ignored(client, operator, path):
    page = client.get(path)
    html = page.get_data(as_text=True)
    assert page.status_code == 422
    assert "Error 422" in html and "query.status: must be one of" in html


@pytest.mark.parametrize(
    "path",
    [
        "/ns/default/incidents?status=resolved&status=open",
        "/ns/default/tasks?status=completed&status=open",
        "/ns/default/schedules?status=paused&status=active",
        "/ns/default/schedules?q=nightly&q=other",
    ],
)
def test_a_filter_shown_once_given_twice_is_refused_not_read_as_its_first(client, operator, path):
    page = client.get(path)
    assert page.status_code == 422
    assert "is given 2 times; choose one" in page.get_data(as_text=True)


def test_good_status_filters_still_list(client, operator):
    for path in (
        "/ns/default/runs?status=failed&status=completed",
        "/ns/default/incidents?status=resolved",
        "/ns/default/tasks?status=completed",
        "/ns/default/tasks",
    ):
        assert client.get(path).status_code == 200, path


def test_unknown_paths_and_csrf_failures_get_the_console_error_page(client, accounts):
    account = accounts.create("olga", role="operator")
    for path in ("/no/such/page", "/ns/default/no-such-page"):
        missing = client.get(path)
        assert missing.status_code == 404
        assert "Error 404" in missing.get_data(as_text=True), path
        assert "Back to the console" in missing.get_data(as_text=True)
    no_token = client.post("/login", data={"username": "olga", "password": account.password})
    assert no_token.status_code == 400
    html = no_token.get_data(as_text=True)
    assert "Error 400" in html and "The CSRF token is missing." in html
    sign_in(client, "olga", account.password)
    refused = client.post("/ns/default/schedules/new", data={"schedule_id": "x"})
    assert refused.status_code == 400 and "Error 400" in refused.get_data(as_text=True)
    assert "Error 404" in client.get("/ns/default/nowhere").get_data(as_text=True)


def test_api_paths_keep_json_errors(client):
    for path in ("/api/v1/no-such-thing", "/api/nothing"):
        missing = client.get(path)
        assert missing.status_code == 404 and missing.is_json, path
    wrong_method = client.delete("/api/v1/health")
    assert wrong_method.is_json
