"""What the schedule forms and the schedules list read from a user, as the API reads it."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import func, select

from app.context import database
from app.db import Schedule
from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from, sign_in


@pytest.fixture
def olga(client, accounts, app):
    account = accounts.create("olga", role="operator")
    seed_workflow(app)
    sign_in(client, "olga", account.password)
    return account


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
