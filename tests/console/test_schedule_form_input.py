"""What the schedule forms and the schedules list read from a user, as the API reads it."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import func, select

from app.context import database
from app.db import Schedule
from tests.console.test_pages import csrf_from


def schedules(app) -> int:
    with database(app).session() as session:
        return session.scalar(select(func.count()).select_from(Schedule))


def error_of(page: str, field: str) -> str:
    found = re.search(rf'id="err-{field}"[^>]*>([^<]*)<', page)
    assert found, page[:3000]
    return html.unescape(found.group(1).strip())


@pytest.mark.parametrize("schedule_id", [".", "..", "..."])
def test_an_id_of_dots_alone_is_refused_by_the_form(client, olga, app, schedule_id):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    before = schedules(app)
    response = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": schedule_id,
            "cron_expressions": "0 2 * * *",
            "workflow": "invoice-sync",
            "input": "{}",
        },
    )
    assert response.status_code == 422
    assert "not dots alone" in error_of(response.get_data(as_text=True), "schedule_id")
    assert schedules(app) == before


def create(client, **fields):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    data = {
        "csrf_token": token,
        "schedule_id": "nightly",
        "cron_expressions": "0 2 * * *",
        "workflow": "invoice-sync",
        "input": "{}",
    }
    return client.post("/ns/default/schedules/new", data=data | fields)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("search_attributes", '{"tenant": "42", "n": 5}', "the value of 'n' must be a string"),
        (
            "labels",
            "team:billing\nlong:" + "x" * 5000,
            "the value of 'long' must be a string of at most 256 characters",
        ),
    ],
)
def test_a_save_error_names_the_key_and_the_unit(client, olga, app, field, value, says):
    before = schedules(app)
    response = create(client, **{field: value})
    assert response.status_code == 422
    assert error_of(response.get_data(as_text=True), field) == says
    assert schedules(app) == before


def save(api, schedule_id: str, labels: dict[str, str]) -> None:
    body = {"id": schedule_id, "cron": "0 2 * * *", "workflow": "invoice-sync", "labels": labels}
    assert api.post("/schedules", json=body).status_code == 201


def listed(page: str) -> set[str]:
    return set(re.findall(r'data-schedule="([^"]+)"', page))


def test_the_list_reads_repeated_labels_as_the_api_does(client, olga, api_for):
    api = api_for("apiuser")
    save(api, "prod-a", {"team": "a", "env": "prod"})
    save(api, "dev-a", {"team": "a", "env": "dev"})
    save(api, "g1", {"grp": "g1"})
    save(api, "g2", {"grp": "g2"})
    save(api, "comma", {"comma": "a,b"})
    for query, expected in (
        ("label=team:a&label=env:prod", {"prod-a"}),
        ("label=grp:g1&label=grp:g2", set()),
        ("label=grp:g1", {"g1"}),
        ("label=comma:a,b", {"comma"}),
        ("label=comma:a", set()),
    ):
        through_api = {
            item["schedule_id"] for item in api.get(f"/schedules?{query}").get_json()["items"]
        }
        assert through_api == expected, query
        page = client.get(f"/ns/default/schedules?{query}")
        assert page.status_code == 200, (query, page.get_data(as_text=True)[:2000])
        assert listed(page.get_data(as_text=True)) == expected, query
    # The form's empty box for one more label is no filter.
    for query, expected in (("label=team:a&label=", {"prod-a", "dev-a"}),):
        page = client.get(f"/ns/default/schedules?{query}")
        assert page.status_code == 200, (query, page.get_data(as_text=True)[:2000])
        assert listed(page.get_data(as_text=True)) == expected, query
    page = client.get("/ns/default/schedules?label=team:a&label=env:prod").get_data(as_text=True)
    # Each label has its box in the filter form, and one more is empty; the live refresh asks
    # for both labels.
    boxes = re.findall(r'<input id="(f-label[^"]*)" name="label"[^>]*value="([^"]*)"', page)
    assert boxes == [("f-label", "team:a"), ("f-label-2", "env:prod"), ("f-label-3", "")]
    assert 'hx-get="/ns/default/schedules?label=team:a&amp;label=env:prod"' in page
    # A label the page cannot read is named, never ignored.
    bad = client.get("/ns/default/schedules?label=team:a&label=oops")
    assert bad.status_code == 422
    text = bad.get_data(as_text=True)
    assert "&#39;oops&#39; is not a label" in text and listed(text) == set()
    assert re.search(r'id="f-label-2"[^>]*value="oops" aria-invalid="true"', text)


def edit_form(client, schedule_id: str) -> dict[str, str]:
    """The fields the edit form submits as shown (a browser sends textareas' lines with CRLF)."""
    page = client.get(f"/ns/default/schedules/{schedule_id}/edit").get_data(as_text=True)
    form = re.search(r"<form[^>]*schedule-form.*?</form>", page, re.S) or re.search(
        r'<form[^>]*method="post".*?</form>', page, re.S
    )
    assert form, page[:2000]
    fields = {}
    for tag in re.findall(r"<input\b[^>]*>", form.group(0)):
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name and 'type="checkbox"' not in tag and 'type="radio"' not in tag:
            fields[name.group(1)] = html.unescape(value.group(1)) if value else ""
    for name, text in re.findall(
        r'<textarea[^>]*name="([^"]+)"[^>]*>\n?(.*?)</textarea>', form.group(0), re.S
    ):
        fields[name] = html.unescape(text).replace("\n", "\r\n")
    for name, value in re.findall(
        r'<select[^>]*name="([^"]+)".*?<option value="([^"]*)"[^>]*selected', form.group(0), re.S
    ):
        fields[name] = value
    return fields


def test_a_label_value_with_a_line_break_round_trips_through_the_edit_form(client, olga, api_for):
    api = api_for("apiuser")
    save(api, "multi", {"multi": "line1\nline2", "team": "a"})
    fields = edit_form(client, "multi")
    # The lines could not say the value: the field shows the labels as a JSON object.
    assert '"multi": "line1\\nline2"' in fields["labels"]
    edited = fields | {"labels": fields["labels"].replace('"team": "a"', '"team": "b"')}
    saved = client.post("/ns/default/schedules/multi/edit", data=edited)
    assert saved.status_code == 302, saved.get_data(as_text=True)[:3000]
    assert api.get("/schedules/multi").get_json()["labels"] == {
        "multi": "line1\nline2",
        "team": "b",
    }
    # What the form as shown would do is simulated, not refused for a line never typed.
    panel = client.post(
        "/ns/default/schedules/simulate-form?schedule_id=multi", data=edit_form(client, "multi")
    )
    assert "is not a label" not in panel.get_data(as_text=True)
    assert "Nothing to simulate" not in panel.get_data(as_text=True)
    # Lines still work, and a JSON box that is not an object is named.
    lines = edit_form(client, "multi") | {"labels": "team:c\r\nmulti:one line"}
    assert client.post("/ns/default/schedules/multi/edit", data=lines).status_code == 302
    assert api.get("/schedules/multi").get_json()["labels"] == {"team": "c", "multi": "one line"}
    assert edit_form(client, "multi")["labels"] == "team:c\r\nmulti:one line"
    wrong = edit_form(client, "multi") | {"labels": '{"team": ["c"]}'}
    refused = client.post("/ns/default/schedules/multi/edit", data=wrong)
    assert refused.status_code == 422
    assert error_of(refused.get_data(as_text=True), "labels") == (
        "the value of 'team' must be a string of at most 256 characters"
    )
