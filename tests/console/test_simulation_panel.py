"""The schedule page's simulation panel: the same answer as the API's simulation, as an htmx
partial or a page, inputs checked, nothing written (both databases)."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from tests.console.test_pages import sign_in
from tests.console.test_schedule_form_input import edit_form
from tests.support.schedules_harness import at


def counts_on(html: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r'data-sim="([a-z_]+)">(\d+)<', html)}


def api_summary(admin_api, schedule_id: str, hours: int, duration: str) -> dict[str, int]:
    now = at("12:00")
    body = {
        "from": now.isoformat(),
        "to": (now + timedelta(hours=hours)).isoformat(),
        "run_duration": duration,
    }
    answer = admin_api.post(f"/schedules/{schedule_id}/simulate", json=body)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()["summary"]


def test_the_panel_agrees_with_the_api_and_writes_nothing(h, client, accounts, admin_api):
    flow = h.workflow("report")
    h.create("every-5", "*/5 * * * *", activation_id=flow, overlap_policy="buffer_one")
    h.set_clock("12:00")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    before = h.counts()
    for horizon, hours in (("24h", 24), ("7d", 168)):
        for minutes in (0, 12):
            url = f"/ns/default/schedules/every-5/simulate?horizon={horizon}&minutes={minutes}"
            partial = client.get(url, headers={"HX-Request": "true"})
            html = partial.get_data(as_text=True)
            assert partial.status_code == 200 and "<html" not in html
            assert "HX-Request" in partial.headers["Vary"]
            expected = api_summary(admin_api, "every-5", hours, f"PT{minutes}M")
            assert counts_on(html) == expected, (horizon, minutes)
    # 12-minute runs every 5 minutes with a buffer of one: most occurrences are skipped.
    assert expected["skipped"] > 0 and expected["buffered"] > 0
    assert 'class="sim-mark mark-skipped"' in html and " style=" not in html
    assert h.counts() == before


def test_the_page_without_htmx_and_the_detail_page_link(h, client, accounts, admin_api):
    flow = h.workflow("report")
    h.create("hourly", "0 * * * *", activation_id=flow)
    h.set_clock("12:00")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    page = client.get("/ns/default/schedules/hourly/simulate?horizon=24h&minutes=5")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "<html" in html and "HX-Request" in page.headers["Vary"]
    assert counts_on(html) == api_summary(admin_api, "hourly", 24, "PT5M")
    assert counts_on(html)["started"] >= 23 and html.count('class="sim-bar run-started"') >= 23
    detail = client.get("/ns/default/schedules/hourly").get_data(as_text=True)
    assert 'hx-get="/ns/default/schedules/hourly/simulate"' in detail
    assert 'action="/ns/default/schedules/hourly/simulate"' in detail


def test_a_bad_run_length_is_named_and_a_paused_schedule_does_nothing(h, client, accounts):
    flow = h.workflow("report")
    h.create("hourly", "0 * * * *", activation_id=flow)
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    for bad in ("-1", "ten", "100000"):
        refused = client.get(
            f"/ns/default/schedules/hourly/simulate?minutes={bad}", headers={"HX-Request": "true"}
        )
        assert refused.status_code == 422
        assert "whole number of minutes" in refused.get_data(as_text=True)
    assert h.post("hourly", "pause", {"reason": "maintenance"}).status_code == 200
    paused = client.get("/ns/default/schedules/hourly/simulate", headers={"HX-Request": "true"})
    assert counts_on(paused.get_data(as_text=True))["started"] == 0
    assert client.get("/ns/default/schedules/missing/simulate").status_code == 404


def form_fields(**changes: str) -> dict[str, str]:
    fields = {
        "cron_expressions": "*/5 * * * *",
        "intervals": "",
        "timezone": "UTC",
        "jitter_seconds": "0",
        "workflow": "report",
        "input": "{}",
        "overlap_policy": "buffer_one",
        "missed_policy": "skip",
        "memo": "{}",
        "search_attributes": "{}",
        "sim_horizon": "24h",
        "sim_minutes": "12",
    }
    return fields | changes


def test_the_form_simulates_what_it_would_save(h, client, accounts, admin_api):
    h.workflow("report")
    h.set_clock("12:00")
    account = accounts.create("oscar", role="operator")
    sign_in(client, "oscar", account.password)
    page = client.get("/ns/default/schedules/new")
    html = page.get_data(as_text=True)
    assert 'hx-post="/ns/default/schedules/simulate-form"' in html
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    before = h.counts()
    answer = client.post(
        "/ns/default/schedules/simulate-form",
        data=form_fields(csrf_token=token),
        headers={"HX-Request": "true"},
    )
    body = answer.get_data(as_text=True)
    assert answer.status_code == 200 and "<html" not in body
    now = at("12:00")
    expected = admin_api.post(
        "/schedules/simulate",
        json={
            "cron": "*/5 * * * *",
            "action": {"workflow": "report"},
            "overlap_policy": "buffer_one",
            "from": now.isoformat(),
            "to": (now + timedelta(hours=24)).isoformat(),
            "run_duration": "PT12M",
        },
    )
    assert expected.status_code == 200, expected.get_json()
    assert counts_on(body) == expected.get_json()["summary"]
    # As the inputs change, so does the answer; a form that cannot be saved says why.
    longer = client.post(
        "/ns/default/schedules/simulate-form",
        data=form_fields(csrf_token=token, sim_horizon="7d", sim_minutes="0"),
        headers={"HX-Request": "true"},
    ).get_data(as_text=True)
    assert counts_on(longer)["started"] > counts_on(body)["started"]
    broken = client.post(
        "/ns/default/schedules/simulate-form",
        data=form_fields(csrf_token=token, cron_expressions="*/5 * * *", workflow="report"),
        headers={"HX-Request": "true"},
    ).get_data(as_text=True)
    assert "Nothing to simulate until the form is valid" in broken
    empty = client.post(
        "/ns/default/schedules/simulate-form",
        data=form_fields(csrf_token=token, cron_expressions=""),
        headers={"HX-Request": "true"},
    ).get_data(as_text=True)
    assert "Fill in the calendar" in empty and "field-error" not in empty
    assert h.counts() == before
    no_token = client.post("/ns/default/schedules/simulate-form", data=form_fields())
    assert no_token.status_code == 400


def test_an_unknown_horizon_is_named_not_replaced(h, client, accounts):
    flow = h.workflow("report")
    h.create("hourly", "0 * * * *", activation_id=flow)
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    refused = client.get(
        "/ns/default/schedules/hourly/simulate?horizon=30d&minutes=5",
        headers={"HX-Request": "true"},
    )
    html = refused.get_data(as_text=True)
    assert refused.status_code == 422
    assert "horizon: choose 24h or 7d" in html and "data-sim=" not in html


def test_the_forms_simulation_names_what_stops_it_in_the_forms_words(h, client, accounts):
    # The panel said "Nothing to simulate until the form is valid: end_at 2020-01-01T00:00:00Z
    # is in the past" (the API's field) while End at says it in the form's words on Save; the
    # calendar preview then dropped its note about EST, shown when there is no end date.
    flow = h.workflow("xwf")
    h.create("taken", "0 * * * *", activation_id=flow)
    h.set_clock("12:00")
    account = accounts.create("oscar", role="operator")
    sign_in(client, "oscar", account.password)
    html = client.get("/ns/default/schedules/new").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    htmx = {"HX-Request": "true"}

    def panel(**changes: str) -> str:
        fields = form_fields(csrf_token=token, workflow="xwf", **changes)
        answer = client.post("/ns/default/schedules/simulate-form", data=fields, headers=htmx)
        assert answer.status_code == 200
        return answer.get_data(as_text=True)

    typed = {
        "cron_expressions": "0 9 * * 1-5",
        "timezone": "EST",
        "end_at": "2020-01-01T00:00:00Z",
    }
    past = panel(**typed)
    assert "Nothing to simulate until the form is valid:" in past
    assert (
        "<strong>End at:</strong> 2020-01-01T00:00:00Z is in the past, so the schedule would "
        "never fire" in past
    )
    assert "end_at" not in past and "data-sim=" not in past
    preview = client.post(
        "/ns/default/calendar/preview", data={"csrf_token": token, **typed}, headers=htmx
    ).get_data(as_text=True)
    assert "No upcoming fire in the bounds." in preview
    assert "EST is a fixed offset (UTC−05:00) and never observes daylight saving time" in preview
    # Every field is named by its label, in the order the form shows them.
    cases = {
        "schedule_id": ("Schedule id", {"schedule_id": "taken"}, "id already exists"),
        "cron_expressions": ("Cron expressions", {"cron_expressions": "*/5 * * *"}, ""),
        "intervals": (
            "Intervals",
            {"cron_expressions": "", "intervals": "PT6H every PT1H"},
            "write 'EVERY' or 'EVERY offset OFFSET'",
        ),
        "timezone": ("Time zone", {"timezone": "Mars/Base"}, ""),
        "start_at": ("Start at", {"start_at": "tomorrow"}, ""),
        "jitter_seconds": ("Jitter seconds", {"jitter_seconds": "3601"}, "from 0 to 3600"),
        "overlap_policy": ("Overlap policy", {"overlap_policy": "sometimes"}, "must be one of"),
        "max_runs": ("Max runs", {"max_runs": "0"}, "must be a whole number"),
    }
    for field, (label, changes, words) in cases.items():
        refused = panel(**changes)
        assert f"<strong>{label}:</strong> " in refused and words in unescape(refused), field
        assert field not in refused and "data-sim=" not in refused, (field, refused)
    both = panel(start_at="tomorrow", end_at="2020-01-01T00:00:00Z")
    assert both.index("Start at:") < both.index("End at:")


def test_an_edit_that_keeps_an_ended_calendar_simulates_to_nothing(h, client, accounts):
    # Save does not refuse an edit that keeps a calendar whose End at has passed (the notes of
    # a finished schedule may still change): the panel must not call the form invalid for it.
    flow = h.workflow("report")
    h.set_clock("12:00")
    spec = {"cron_expressions": ["0 * * * *"], "end_at": "2026-01-05T14:30:00Z"}
    h.save({"id": "finite", "spec": spec, "activation_id": flow, "input": {}}, expect=201)
    h.set_clock(at("12:00") + timedelta(days=1))
    account = accounts.create("oscar", role="operator")
    sign_in(client, "oscar", account.password)
    fields = edit_form(client, "finite") | {"notes": "kept for the audit"}

    def simulate(data: dict[str, str]) -> str:
        url = "/ns/default/schedules/simulate-form?schedule_id=finite"
        return client.post(url, data=data, headers={"HX-Request": "true"}).get_data(as_text=True)

    panel = simulate(fields)
    assert "Nothing would happen: the calendar has no occurrence ahead" in panel, panel
    assert "Nothing to simulate" not in panel and "end_at" not in panel
    # Changed to another calendar that ended too, it is named under End at, as Save names it.
    moved = fields | {"cron_expressions": "30 * * * *"}
    refused = simulate(moved)
    assert "<strong>End at:</strong> 2026-01-05T14:30:00Z is in the past" in refused, refused
