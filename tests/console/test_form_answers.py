"""What the schedule form, the lists and a refused action tell the user, in one answer."""

from __future__ import annotations

import html
import re

import pytest

from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from


def summary_of(page: str) -> list[str]:
    """The error summary's lines, in order."""
    box = re.search(r'<div id="error-summary".*?</ul>', page, re.S)
    assert box, page[:3000]
    return [html.unescape(line) for line in re.findall(r'<li><a href="#[^"]+">([^<]*)</a>', box[0])]


MANY_MISTAKES = {
    "schedule_id": "bad id!<b>",
    "cron_expressions": "61 * * * *",
    "intervals": "PT6X",
    "timezone": "europe/paris",
    "start_at": "yesterday",
    "jitter_seconds": "-5",
    "workflow": "invoice-sync",
    "input": "{bad json",
    "execution_timeout_seconds": "1.5",
    "run_timeout_seconds": "0",
    "queue": "q q",
    "max_runs": "0",
    "labels": "team:billing\nno colon here",
    "memo": "[1,2]",
    "search_attributes": '{"n": 5}',
}
PAGE_ORDER = [
    "Schedule id",
    "Cron expressions",
    "Intervals",
    "Time zone",
    "Start at",
    "Jitter seconds",
    "Input",
    "Execution timeout",
    "Run timeout",
    "Queue",
    "Max runs",
    "Labels",
    "Memo",
    "Search attributes",
]


def test_every_field_is_checked_on_the_first_submit_and_listed_in_page_order(client, olga):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    response = client.post("/ns/default/schedules/new", data={"csrf_token": token} | MANY_MISTAKES)
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    lines = summary_of(page)
    assert "14 problems to fix before saving" in page
    assert [line.split(":")[0] for line in lines] == PAGE_ORDER
    assert "Queue: must be 1-64 letters" in lines[9]
    assert lines[13] == "Search attributes: the value of 'n' must be a string"


def post_new(client, **fields: str):
    """The new-schedule form posted with a valid calendar and workflow and `fields` over them."""
    token = csrf_from(client.get("/ns/default/schedules/new"))
    data = {"csrf_token": token, "cron_expressions": "0 2 * * *", "workflow": "invoice-sync"}
    return client.post("/ns/default/schedules/new", data=data | fields)


def test_the_edit_form_checks_every_field_in_one_pass_too(client, olga):
    created = post_new(client, schedule_id="nightly")
    assert created.status_code == 302
    edit = client.get("/ns/default/schedules/nightly/edit")
    revision = re.search(r'name="revision" value="(\d+)"', edit.get_data(as_text=True))[1]
    response = client.post(
        "/ns/default/schedules/nightly/edit",
        data={
            "csrf_token": csrf_from(edit),
            "revision": revision,
            "cron_expressions": "0 2 * * *",
            "workflow": "invoice-sync",
            "queue": "q q",
            "search_attributes": '{"n": 5}',
            "jitter_seconds": "-5",
        },
    )
    assert response.status_code == 422
    lines = summary_of(response.get_data(as_text=True))
    assert [line.split(":")[0] for line in lines] == [
        "Jitter seconds",
        "Queue",
        "Search attributes",
    ]


def test_an_end_at_in_the_past_is_named_under_end_at_in_the_forms_words(client, olga):
    response = post_new(client, end_at="2020-01-01T00:00:00Z")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert summary_of(page) == [
        "End at: 2020-01-01T00:00:00Z is in the past, so the schedule would never fire: "
        "choose a later time, or leave it empty"
    ]
    assert 'id="end_at"' in page and re.search(r'id="end_at"[^>]*aria-invalid="true"', page)
    assert 'id="err-cron_expressions"' not in page
    assert "end_at 2020" not in page


@pytest.mark.parametrize(
    ("field", "wrong", "label"),
    [("cron_expressions", "0 3 * *", "Cron expressions"), ("timezone", "Nope/Zone", "Time zone")],
)
def test_an_end_at_in_the_past_is_named_beside_another_calendar_mistake(
    client, olga, field, wrong, label
):
    # Held back until the other calendar field was fixed: a second submit to learn of it.
    response = post_new(client, end_at="2020-01-01T00:00:00Z", **{field: wrong})
    assert response.status_code == 422
    named = [line.split(":")[0] for line in summary_of(response.get_data(as_text=True))]
    assert label in named and "End at" in named


def save_schedule(api, schedule_id: str) -> None:
    body = {"id": schedule_id, "cron": "0 2 * * *", "workflow": "invoice-sync"}
    assert api.post("/schedules", json=body).status_code == 201


@pytest.mark.parametrize(
    ("query", "named", "kept_out"),
    [
        (
            "status=active&status=paused",
            "Status filter: status is given 2 times",
            "selected>active",
        ),
        ("q=a&q=b", "Search: q is given 2 times", 'value="a"'),
    ],
)
def test_a_refused_filter_is_named_and_not_applied(client, olga, api_for, query, named, kept_out):
    save_schedule(api_for("apiuser"), "nightly")
    response = client.get(f"/ns/default/schedules?{query}")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert named in page and "The filter was not applied" in page
    assert "Label filter" not in page
    assert "No schedules match" not in page
    assert "the filter above could not be read, so it was not applied" in page
    # The box shows no value as if it had been read, and the list does not poll a refusal.
    form = re.search(r'<form id="schedule-filters".*?</form>', page, re.S)[0]
    assert kept_out not in form
    assert 'aria-invalid="true"' in form
    assert 'hx-trigger="every 5s"' not in page


def test_a_later_page_links_back_to_the_first_with_the_same_filters(client, olga, api_for):
    api = api_for("apiuser")
    for number in range(51):
        save_schedule(api, f"s-{number:02d}")
    first = client.get("/ns/default/schedules?status=active").get_data(as_text=True)
    assert "First page" not in first
    next_url = html.unescape(re.search(r'<a class="button" href="([^"]+)">Next page', first)[1])
    second = client.get(next_url).get_data(as_text=True)
    back = re.search(r'<a class="button" href="([^"]+)">← First page</a>', second)
    assert back, second[-2000:]
    assert html.unescape(back[1]) == "/ns/default/schedules?status=active"
    again = client.get(html.unescape(back[1])).get_data(as_text=True)
    rows = re.compile(r'data-schedule="([^"]+)"')
    assert rows.findall(again) == rows.findall(first) and len(rows.findall(first)) == 50


def test_every_cursor_list_offers_its_first_page(client, olga, app, monkeypatch):
    monkeypatch.setattr("app.console.workflows.PAGE", 1)
    seed_workflow(app, "zz-second")
    first = client.get("/ns/default/workflows").get_data(as_text=True)
    next_url = html.unescape(re.search(r'<a class="button" href="([^"]+)">Next page', first)[1])
    second = client.get(next_url).get_data(as_text=True)
    assert re.search(r'href="/ns/default/workflows">← First page</a>', second)


def test_a_trigger_refused_for_a_deleted_schedule_says_not_done_and_offers_a_reload(
    client, olga, api_for
):
    api = api_for("apiuser")
    save_schedule(api, "nightly")
    token = csrf_from(client.get("/ns/default/schedules/nightly"))
    gone = api.request("DELETE", "/schedules/nightly", headers={"If-Match": "1"})
    assert gone.status_code == 200
    answer = client.post(
        "/ns/default/schedules/nightly/trigger",
        data={"csrf_token": token},
        headers={"HX-Request": "true"},
    )
    text = html.unescape(answer.get_data(as_text=True))
    assert answer.status_code == 200
    assert "Not done. Error 409: schedule 'nightly' is deleted; its id is never reused." in text
    assert "This page is out of date:" in text
    assert '<a href="/ns/default/schedules/nightly">Reload it</a>' in text


def strip_of(client, schedule_id: str) -> tuple[list[float], list[str]]:
    """The upcoming-fires strip: its marks' x positions and its labels."""
    page = client.get(f"/ns/default/schedules/{schedule_id}").get_data(as_text=True)
    svg = re.search(r'<figure class="chart timeline">.*?</figure>', page, re.S)
    assert svg, page[:3000]
    marks = [float(x) for x in re.findall(r'<circle cx="([0-9.]+)"', svg[0])]
    labels = re.findall(r'class="tick">([^<]+)</text>', svg[0])
    return marks, labels


def test_a_daily_schedules_strip_is_labelled_with_dates(client, olga, api_for):
    body = {"id": "daily", "cron": "0 9 * * *", "workflow": "invoice-sync"}
    assert api_for("apiuser").post("/schedules", json=body).status_code == 201
    marks, labels = strip_of(client, "daily")
    assert len(marks) == 20
    assert 2 <= len(labels) <= 7 and all(re.fullmatch(r"\d\d-\d\d", label) for label in labels)


def test_a_strip_of_a_schedule_starting_later_spreads_its_marks(client, olga, api_for):
    body = {
        "id": "later",
        "spec": {
            "cron_expressions": ["30 2 * * *"],
            "timezone": "America/New_York",
            "start_at": "2027-03-05T00:00:00Z",
        },
        "workflow": "invoice-sync",
    }
    assert api_for("apiuser").post("/schedules", json=body).status_code == 201
    marks, labels = strip_of(client, "later")
    # The strip runs from the first upcoming fire to the last: marks across its whole width.
    assert min(marks) == pytest.approx(28, abs=1) and max(marks) == pytest.approx(372, abs=1)
    assert len({round(x) for x in marks}) == 20
    assert labels and labels[0].startswith("03-")


def test_a_save_after_the_session_ended_says_not_saved_and_comes_back_as_typed(
    client, olga, api_for
):
    save_schedule(api_for("apiuser"), "nightly")
    edit = client.get("/ns/default/schedules/nightly/edit")
    token = csrf_from(edit)
    revision = re.search(r'name="revision" value="(\d+)"', edit.get_data(as_text=True))[1]
    typed_by = re.search(r'name="typed_by" value="([^"]+)"', edit.get_data(as_text=True))[1]
    assert typed_by == "olga"
    # Signed out in another tab: the cookie's session ends.
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    url = "http://localhost/ns/default/schedules/nightly/edit"
    refused = client.post(
        "/ns/default/schedules/nightly/edit",
        data={
            "csrf_token": token,
            "typed_by": typed_by,
            "revision": revision,
            "cron_expressions": "0 3 * * *",
            "workflow": "invoice-sync",
            "notes": "moved to three",
        },
        headers={"Referer": url},
    )
    assert refused.status_code == 302
    login = refused.headers["Location"]
    assert login.startswith("/login?next=") and "edit" in login
    page = client.get(login)
    text = html.unescape(page.get_data(as_text=True))
    assert "what you submitted was NOT saved" in text and "Please sign in." not in text
    signed_in = client.post(
        "/login",
        data={
            "username": "olga",
            "password": olga.password,
            "csrf_token": csrf_from(page),
            "next": "/ns/default/schedules/nightly/edit",
        },
    )
    assert signed_in.headers["Location"] == "/ns/default/schedules/nightly/edit"
    back = html.unescape(client.get("/ns/default/schedules/nightly/edit").get_data(as_text=True))
    assert "this form was not saved" in re.sub(r"</?strong>", "", back)
    assert "moved to three" in back and ">0 3 * * *</textarea>" in back
    assert f'name="revision" value="{revision}"' in back
    # Once: the next visit shows the stored schedule.
    again = client.get("/ns/default/schedules/nightly/edit").get_data(as_text=True)
    assert "moved to three" not in again and ">0 2 * * *</textarea>" in again


def test_a_draft_kept_across_sign_in_goes_back_only_to_who_typed_it(
    client, olga, accounts, api_for
):
    # Olga's edit, posted after her session ended, came back to whoever signed in next on the
    # same browser (and could be saved under their name).
    save_schedule(api_for("apiuser"), "nightly")
    ivan = accounts.create("ivan", role="operator")
    edit = client.get("/ns/default/schedules/nightly/edit")
    token = csrf_from(edit)
    revision = re.search(r'name="revision" value="(\d+)"', edit.get_data(as_text=True))[1]
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    refused = client.post(
        "/ns/default/schedules/nightly/edit",
        data={
            "csrf_token": token,
            "typed_by": "olga",
            "revision": revision,
            "cron_expressions": "0 3 * * *",
            "workflow": "invoice-sync",
            "notes": "olga's private note",
        },
    )
    page = client.get(refused.headers["Location"])
    client.post(
        "/login",
        data={
            "username": "ivan",
            "password": ivan.password,
            "csrf_token": csrf_from(page),
            "next": "/ns/default/schedules/nightly/edit",
        },
    )
    shown = html.unescape(client.get("/ns/default/schedules/nightly/edit").get_data(as_text=True))
    assert "olga's private note" not in shown and "not saved" not in shown
    assert 'name="typed_by" value="ivan"' in shown


@pytest.mark.parametrize("days", [20, 400, 700])
def test_the_upcoming_strips_date_labels_stay_apart_and_whole(days):
    # A monthly schedule's strip (its labels carrying the year) printed seven of them over
    # one another, the first cut off at the left end.
    from datetime import UTC, datetime, timedelta

    from app.console.charts import TIMELINE_WIDTH, timeline

    start = datetime(2027, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=days)
    strip = timeline([(start, None), (end, None)], start - timedelta(days=30), end)
    widths = [len(tick.label) * 6.5 for tick in strip.ticks]  # the tick font's advance, about
    assert strip.ticks, "dates are labelled"
    assert strip.ticks[0].x >= widths[0] / 2
    for left, right, width in zip(strip.ticks, strip.ticks[1:], widths, strict=False):
        assert right.x - left.x >= width + 8
    assert all(0 <= tick.x <= TIMELINE_WIDTH for tick in strip.ticks)
