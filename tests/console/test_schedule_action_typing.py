"""What was typed into a schedule page's action forms (the pause reason, the backfill range)
comes back when the action is refused or posted after its session ended; an htmx action sent
after its session ended says it was not done, in words, not in CSRF terms."""

from __future__ import annotations

import html
import re

from app.ticker.tick import run_tick
from tests.console.conftest import seed_workflow
from tests.console.test_form_answers import save_schedule
from tests.console.test_pages import csrf_from, sign_in
from tests.console.test_run_pages import TASK_STEPS

PAGE = "/ns/default/schedules/s2"
REFERER = {"Referer": "http://localhost" + PAGE}
HTMX = {"HX-Request": "true", "HX-Current-URL": "http://localhost" + PAGE}


def value_of(page: str, field_id: str) -> str:
    """The value an input of the page holds ('' when it has none)."""
    tag = re.search(rf'<input id="{field_id}"[^>]*>', page)
    assert tag, field_id
    value = re.search(r'\svalue="([^"]*)"', tag[0])
    return html.unescape(value[1]) if value else ""


def counts_on_load(page: str) -> bool:
    """Whether the backfill count asks for itself as the page loads (from the range fields)."""
    count = re.search(r'<p id="backfill-count"[^>]*>', page)
    assert count, page
    tag = count[0]
    return 'hx-trigger="load"' in tag and 'hx-include="#bf-from, #bf-to, #bf-policy"' in tag


def selected_policy(page: str) -> str:
    select = re.search(r'<select id="bf-policy".*?</select>', page, re.S)
    assert select
    chosen = re.search(r'<option value="([^"]*)" selected>', select[0])
    return chosen[1] if chosen else ""


def text_of(response) -> str:
    return html.unescape(response.get_data(as_text=True))


def sign_out_elsewhere(client, token: str) -> None:
    # Signed out in another tab: the browser's cookie is shared, so this page's session ended.
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302


def sign_in_to(client, login: str, account) -> None:
    page = client.get(login)
    signed_in = client.post(
        "/login",
        data={
            "username": account.username,
            "password": account.password,
            "csrf_token": csrf_from(page),
            "next": PAGE,
        },
    )
    assert signed_in.headers["Location"] == PAGE


def test_a_pause_refused_for_a_stale_revision_keeps_its_reason(client, olga, api_for):
    api = api_for("apiuser")
    save_schedule(api, "s2")
    token = csrf_from(client.get(PAGE))
    changed = api.request("PATCH", "/schedules/s2", json={"notes": "x"}, headers={"If-Match": "1"})
    assert changed.status_code == 200
    refused = client.post(
        PAGE + "/pause",
        data={"csrf_token": token, "revision": "1", "reason": "stale pause"},
        headers=REFERER,
    )
    assert refused.status_code == 302 and refused.headers["Location"] == PAGE
    page = text_of(client.get(PAGE))
    assert "Someone else changed s2 (now revision 2); the page is reloaded, try again." in page
    assert value_of(page, "pause-reason") == "stale pause"
    assert "not paused" not in page  # refused, not lost to an ended session
    # Once: the next visit shows an empty box.
    assert value_of(text_of(client.get(PAGE)), "pause-reason") == ""
    assert api.get("/schedules/s2").get_json()["status"] == "active"


def _post_after_sign_out(client, action: str, fields: dict[str, str], headers: dict[str, str]):
    """Post the schedule page's `action` form as olga typed it, after she signed out in
    another tab (the page's token is from before)."""
    token = csrf_from(client.get(PAGE))
    sign_out_elsewhere(client, token)
    data = {"csrf_token": token, "typed_by": "olga", **fields}
    return client.post(PAGE + action, data=data, headers=headers)


def test_a_pause_posted_after_the_session_ended_comes_back_marked_not_saved(client, olga, api_for):
    api = api_for("apiuser")
    save_schedule(api, "s2")
    fields = {"revision": "1", "reason": "reason typed XYZ"}
    refused = _post_after_sign_out(client, "/pause", fields, REFERER)
    assert refused.status_code == 302
    login = refused.headers["Location"]
    assert "the form comes back as you typed it" in text_of(client.get(login))
    sign_in_to(client, login, olga)
    page = text_of(client.get(PAGE))
    assert "Your session had ended, so s2 was not paused" in re.sub(r"</?strong>", "", page)
    assert value_of(page, "pause-reason") == "reason typed XYZ"
    assert api.get("/schedules/s2").get_json()["status"] == "active"
    again = text_of(client.get(PAGE))
    assert value_of(again, "pause-reason") == "" and "not paused" not in again


def test_a_refused_plain_backfill_keeps_its_range_and_policy(client, olga, api_for):
    save_schedule(api_for("apiuser"), "s2")
    token = csrf_from(client.get(PAGE))
    typed = {
        "from": "2026-01-03T00:00:00Z",
        "to": "2026-01-01T00:00:00Z",
        "overlap_policy": "allow_all",
    }
    refused = client.post(PAGE + "/backfill", data={"csrf_token": token, **typed}, headers=REFERER)
    assert refused.status_code == 302 and refused.headers["Location"] == PAGE
    page = text_of(client.get(PAGE))
    assert value_of(page, "bf-from") == typed["from"]
    assert value_of(page, "bf-to") == typed["to"]
    assert selected_policy(page) == "allow_all"


def test_an_htmx_backfill_after_the_session_ended_comes_back_after_sign_in(client, olga, api_for):
    save_schedule(api_for("apiuser"), "s2")
    fields = {
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-01-02T00:00:00Z",
        "overlap_policy": "skip",
    }
    sent = _post_after_sign_out(client, "/backfill", fields, HTMX)
    assert sent.status_code == 204
    login = sent.headers["HX-Redirect"]
    assert login == "/login?next=%2Fns%2Fdefault%2Fschedules%2Fs2"
    shown = text_of(client.get(login))
    assert "NOT saved" in shown and "CSRF token" not in shown
    sign_in_to(client, login, olga)
    page = text_of(client.get(PAGE))
    assert "this backfill was not started" in re.sub(r"</?strong>", "", page)
    assert value_of(page, "bf-from") == "2026-01-01T00:00:00Z"
    assert value_of(page, "bf-to") == "2026-01-02T00:00:00Z"
    assert selected_policy(page) == "skip"
    # The range brought back is counted as the page loads, from the fields as shown.
    assert counts_on_load(page)
    assert re.search(r'<input id="bf-from"[^>]*\sautofocus', page)  # opened at the range
    assert not counts_on_load(text_of(client.get(PAGE)))


def test_an_htmx_trigger_after_the_session_ended_says_it_was_not_done(client, olga, api_for):
    # It said "The form was not accepted: The CSRF tokens do not match. Reload the page …" on
    # the sign-in page, then "Please sign in.", and never that no run was started.
    api = api_for("apiuser")
    save_schedule(api, "s2")
    token = csrf_from(client.get(PAGE))
    sign_out_elsewhere(client, token)
    client.get("/login")  # the other tab's sign-in page gives the browser a new token
    sent = client.post(
        PAGE + "/trigger", data={"csrf_token": token, "typed_by": "olga"}, headers=HTMX
    )
    assert sent.status_code == 204
    login = sent.headers["HX-Redirect"]
    assert login == "/login?next=%2Fns%2Fdefault%2Fschedules%2Fs2"
    shown = text_of(client.get(login))
    assert "Your session had ended, so that was NOT done. Sign in and try again." in shown
    assert "CSRF token" not in shown and "Reload the page" not in shown
    assert "Please sign in." not in shown
    sign_in_to(client, login, olga)
    assert "NOT done" not in text_of(client.get(PAGE))  # said once
    assert api.get("/schedules/s2").get_json()["fires_count"] == 0


def test_an_htmx_trigger_with_a_token_from_before_a_sign_in_elsewhere_says_nothing_was_done(
    client, olga, accounts, api_for
):
    save_schedule(api_for("apiuser"), "s2")
    stale = csrf_from(client.get(PAGE))
    nia = accounts.create("nia", role="operator")
    sign_in(client, "nia", nia.password)  # another tab signed in again
    sent = client.post(PAGE + "/trigger", data={"csrf_token": stale}, headers=HTMX)
    assert sent.status_code == 204 and sent.headers["HX-Refresh"] == "true"
    page = text_of(client.get(PAGE))
    assert "The form could not be verified, so nothing was done" in page
    assert "CSRF token" not in page


def test_a_task_completed_by_htmx_after_the_session_ended_comes_back_as_typed(
    app, client, olga, api_for
):
    # The sign-in page promised the output back; the inbox showed '{}' (and, before, the sign-in
    # page spoke of CSRF tokens).
    api = api_for("starter")
    seed_workflow(app, "review", steps=TASK_STEPS)
    assert api.post("/runs", json={"workflow": "review", "run_id": "r-1"}).status_code == 201
    run_tick(app, work=True)
    inbox = client.get("/ns/default/tasks")
    task_id = api.get("/tasks").get_json()["items"][0]["id"]
    token = csrf_from(inbox)
    sign_out_elsewhere(client, token)
    sent = client.post(
        f"/ns/default/tasks/{task_id}/complete",
        data={"csrf_token": token, "typed_by": "olga", "output": '{"checked": "by olga"}'},
        headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/ns/default/tasks"},
    )
    assert sent.status_code == 204
    login = sent.headers["HX-Redirect"]
    assert "the form comes back as you typed it" in text_of(client.get(login))
    page = client.get(login)
    client.post(
        "/login",
        data={
            "username": "olga",
            "password": olga.password,
            "csrf_token": csrf_from(page),
            "next": "/ns/default/tasks",
        },
    )
    shown = text_of(client.get("/ns/default/tasks"))
    assert "this task was not completed" in re.sub(r"</?strong>", "", shown)
    assert '>{"checked": "by olga"}</textarea>' in shown
    assert api.get("/tasks").get_json()["items"][0]["status"] == "open"
