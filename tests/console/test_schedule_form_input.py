"""What the schedule forms and the schedules list read from a user, as the API reads it."""

from __future__ import annotations

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


def error_of(html: str, field: str) -> str:
    found = re.search(rf'id="err-{field}"[^>]*>([^<]*)<', html)
    assert found, html[:3000]
    return found.group(1).strip()


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
