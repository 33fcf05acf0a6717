"""Relative times around now, in both directions, and the UTC / schedule-zone switch."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.console.timefmt import relative
from tests.conftest import FIXED_NOW
from tests.console.test_pages import csrf_from, sign_in

NOW = FIXED_NOW


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (0, "just now"),
        (1, "just now"),
        (-1, "just now"),
        (9.9, "just now"),
        (-9.9, "just now"),
        (10, "in 10 s"),
        (-10, "10 s ago"),
        (59, "in 59 s"),
        (-59.5, "59 s ago"),
        (60, "in 1 min"),
        (-60, "1 min ago"),
        (300, "in 5 min"),
        (-300, "5 min ago"),
        (359, "in 5 min"),  # truncated: never promises less time than is left
        (3599, "in 59 min"),
        (3600, "in 1 h"),
        (-3600, "1 h ago"),
        (3600 + 25 * 60, "in 1 h 25 min"),
        (-(2 * 3600 + 60), "2 h 1 min ago"),
        (6 * 3600, "in 6 h"),
        (-(47 * 3600), "47 h ago"),
        (2 * 86400, "in 2 d"),
        (-(9 * 86400 + 5), "9 d ago"),
    ],
)
def test_relative_reads_right_both_ways(offset, text):
    assert relative(NOW + timedelta(seconds=offset), NOW) == text


def test_relative_of_nothing_is_a_dash():
    assert relative(None, NOW) == "—"


def test_past_events_never_read_as_future():
    for seconds in range(0, 4000, 7):
        past = relative(NOW - timedelta(seconds=seconds, microseconds=1), NOW)
        assert not past.startswith("in "), (seconds, past)
        future = relative(NOW + timedelta(seconds=seconds, microseconds=1), NOW)
        assert not future.endswith(" ago"), (seconds, future)


def test_zone_toggle_sticks_and_changes_absolute_times(h, client):
    activation = h.workflow()
    h.create("paris", "30 7 * * *", activation_id=activation, timezone="Europe/Paris")
    sign_in(client, "olga", "pw-olga-secret")
    page = client.get("/ns/default/schedules").get_data(as_text=True)
    assert "2026-01-06 06:30:00 UTC" in page  # UTC by default
    assert "Times: UTC" in page
    token = csrf_from(client.get("/ns/default/schedules"))
    switched = client.post(
        "/preferences/times",
        data={"show": "zone", "next": "/ns/default/schedules?status=active", "csrf_token": token},
    )
    assert switched.status_code == 302
    assert switched.headers["Location"] == "/ns/default/schedules?status=active"
    assert "almanac_times=zone" in switched.headers["Set-Cookie"]
    page = client.get("/ns/default/schedules").get_data(as_text=True)
    assert "2026-01-06 07:30:00 +0100 (Europe/Paris)" in page
    assert "Times: schedule zone" in page
    # The other display stays on hover.
    assert 'title="2026-01-06 07:30:00 +0100 (Europe/Paris) · 2026-01-06 06:30:00 UTC"' in page
    back = client.post(
        "/preferences/times", data={"show": "utc", "next": "//evil.example", "csrf_token": token}
    )
    assert back.headers["Location"] == "/"  # only local paths
    # Browsers drop tabs and newlines from URLs: "/\t/evil.example" would leave the site.
    # Dot segments that a browser resolves to "//evil…" go home too.
    hostile = ("/\t/evil.example", "/\n/evil.example", "/ns/default/runs/a\nb", "/\\evil")
    hostile += ("/.//evil.example", "/./\\evil", "/a/../..//evil")
    for target in hostile:
        moved = client.post(
            "/preferences/times", data={"show": "utc", "next": target, "csrf_token": token}
        )
        assert (moved.status_code, moved.headers["Location"]) == (302, "/"), target
    assert "2026-01-06 06:30:00 UTC" in client.get("/ns/default/schedules").get_data(as_text=True)


def switch_times(client, show: str) -> None:
    token = csrf_from(client.get("/ns/default/schedules"))
    client.post("/preferences/times", data={"show": show, "next": "/", "csrf_token": token})


def test_the_schedule_page_and_its_history_follow_the_switch(h, client):
    activation = h.workflow()
    h.create("paris", "30 7 * * *", activation_id=activation, timezone="Europe/Paris")
    h.tick("2026-01-06T06:30:00Z")  # one fire: a row in the ledger
    h.set_clock("2026-01-06T07:00:00Z")
    sign_in(client, "olga", "pw-olga-secret")
    detail = client.get("/ns/default/schedules/paris").get_data(as_text=True)
    ledger = detail.split('aria-label="Occurrence ledger"', 1)[1]
    assert ">2026-01-06T06:30:00" not in ledger  # no raw ISO text
    assert ">2026-01-06 06:30:00 UTC<" in ledger
    history = client.get("/ns/default/schedules/paris/history").get_data(as_text=True)
    assert re.search(r'title="2026-01-0[56] \d\d:\d\d:\d\d UTC · [^"]+\(Europe/Paris\)"', history)

    switch_times(client, "zone")
    detail = client.get("/ns/default/schedules/paris").get_data(as_text=True)
    next_due = detail.split("<dt>Next due</dt>", 1)[1].split("</dd>", 1)[0]
    assert ">2026-01-07 07:30:00 +0100 (Europe/Paris)</time>" in next_due
    assert 'title="2026-01-07 06:30:00 UTC"' in next_due
    ledger = detail.split('aria-label="Occurrence ledger"', 1)[1]
    assert ">2026-01-06 07:30:00 +0100 (Europe/Paris)<" in ledger
    history = client.get("/ns/default/schedules/paris/history").get_data(as_text=True)
    assert re.search(r'title="2026-01-0[56] [^"]+\(Europe/Paris\) · [^"]+ UTC"', history)
