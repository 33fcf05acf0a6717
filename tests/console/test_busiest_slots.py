"""The overview's busiest slots: counted from each distinct calendar, kept for a minute of the
app's clock per process, then read again; slots are 5 minutes of the UTC clock (both
databases)."""

from __future__ import annotations

import re
from datetime import timedelta

from tests.console.test_pages import sign_in
from tests.support.schedules_harness import at


def slots(client) -> list[tuple[str, int]]:
    text = client.get("/ns/default/overview/busiest", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    return [
        (hhmm, int(n))
        for hhmm, n in re.findall(r">(\d\d:\d\d)Z</time>.*?<strong>(\d+)</strong>", text)
    ]


def test_busiest_slots_follow_new_schedules_within_a_minute(h, client):
    ready = h.workflow("report")
    for n in range(3):
        h.create(f"herd-{n}", "30 14 * * *", activation_id=ready)
    h.create("other", "0 18 * * *", activation_id=ready)
    h.set_clock("12:00")
    sign_in(client, "olga", "pw-olga-secret")
    assert slots(client) == [("14:30", 3), ("18:00", 1)]
    h.create("late", "30 14 * * *", activation_id=ready)
    # Kept for a minute: the new schedule is not counted yet.
    h.set_clock(at("12:00") + timedelta(seconds=59))
    # Slots are the clock's 5 minutes, whatever the minute now is.
    assert slots(client) == [("14:30", 3), ("18:00", 1)]
    h.set_clock("12:05")
    assert slots(client) == [("14:30", 4), ("18:00", 1)]
    h.set_clock("12:07:30")
    assert slots(client) == [("14:30", 4), ("18:00", 1)]
    # A start that has passed leaves the window even while the starts are kept.
    h.set_clock("14:29:30")
    sign_in(client, "olga", "pw-olga-secret")  # (the session idled out meanwhile)
    assert slots(client) == [("14:30", 4), ("18:00", 1)]
    h.set_clock("14:30:20")
    # Today's 14:30 has passed; tomorrow's is now inside the 24 hours.
    assert slots(client) == [("14:30", 4), ("18:00", 1)]


def test_the_load_page_counts_per_five_minutes_of_the_clock(h, client):
    ready = h.workflow("report")
    for n in range(3):
        h.create(f"herd-{n}", "0 17 * * *", activation_id=ready)
    h.create("late", "4 17 * * *", activation_id=ready)
    h.set_clock("15:16")
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/load").get_data(as_text=True)
    busiest = html.split("<h2>Busiest slots</h2>", 1)[1].split("</ol>", 1)[0]
    assert "<li>2026-01-05 17:00Z — 4 runs</li>" in busiest, busiest
    assert "<title>2026-01-05 17:00Z: 4 runs</title>" in html
