"""The console in Debian Chromium against a real gunicorn process (manual clock, ticker on)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.console.conftest import sign_in

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def workflows(live_api):
    return {
        "noop": live_api.deploy("report", [{"id": "a", "type": "action", "action": "noop"}]),
        "signal": live_api.deploy(
            "approval",
            [
                {
                    "id": "wait-approve",
                    "type": "signal",
                    "signal": "approve",
                    "timeout_seconds": 86400,
                    "on_timeout": "fail",
                },
                {"id": "done", "type": "action", "action": "noop"},
            ],
        ),
        "task": live_api.deploy(
            "review",
            [
                {
                    "id": "check",
                    "type": "task",
                    "title": "Check totals",
                    "role": "operator",
                    "timeout_seconds": 86400,
                    "on_timeout": "fail",
                }
            ],
        ),
    }


def test_create_schedule_with_live_preview_and_field_error(
    live_server, live_api, workflows, page, artifacts
):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules")  # sign-in lands on the overview
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Schedule id").fill("nightly-report")
    page.get_by_label("Cron expressions").fill("30 2 * * *")
    page.get_by_label("Time zone").fill("America/New_York")
    preview = page.locator("#preview")
    preview.get_by_text("2026-03-08 07:00:00 UTC").wait_for()
    assert "does not exist" in preview.inner_text()
    page.locator("#workflow").fill("report")
    page.locator("#input").fill("{not json")
    page.screenshot(path=str(artifacts / "console-form-preview.png"), full_page=True)
    page.get_by_role("button", name="Create schedule").click()
    page.locator("#err-input").wait_for()
    assert "not valid JSON" in page.locator("#err-input").inner_text()
    page.screenshot(path=str(artifacts / "console-form-error.png"), full_page=True)
    page.locator("#input").fill('{"mode": "nightly"}')
    page.get_by_role("button", name="Create schedule").click()
    page.wait_for_url("**/schedules/nightly-report")
    assert page.locator(".upcoming").get_by_text("2026-03-08 07:00:00 UTC").is_visible()
    page.screenshot(path=str(artifacts / "console-detail.png"), full_page=True)

    page.goto(live_server.url + "/ns/default/schedules")
    row = page.locator("tr[data-schedule='nightly-report']")
    assert "2026-03-08 07:00:00 UTC" in row.inner_text()
    assert "active" in row.inner_text()
    page.screenshot(path=str(artifacts / "console-list-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(artifacts / "console-list-390.png"), full_page=True)
    # On a phone each filter's caption sits on its control's line, never at the end of the
    # line above it.
    for control in ("#f-status", "#f-label", "#f-q"):
        caption = page.locator(f"label[for='{control[1:]}']").bounding_box()
        box = page.locator(control).bounding_box()
        assert caption and box and caption["x"] < box["x"], control
        middle = caption["y"] + caption["height"] / 2
        assert box["y"] <= middle <= box["y"] + box["height"], control


def test_pause_resume_trigger_and_delete(live_server, live_api, workflows, page, artifacts):
    live_api.post(
        "/schedules",
        {"schedule_id": "ops-daily", "cron": "0 6 * * *", "action": {"workflow": "report"}},
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/ops-daily")
    page.get_by_label("Pause reason").fill("maintenance window")
    page.get_by_role("button", name="Pause").click()
    page.get_by_text("Paused ops-daily.").wait_for()
    assert "maintenance window" in page.locator(".headline").inner_text()
    page.get_by_role("button", name="Resume").click()
    page.get_by_text("Resumed ops-daily.").wait_for()
    page.get_by_role("button", name="Trigger now").click()
    result = page.locator("#action-result")
    result.get_by_text("schedule:ops-daily:manual:").wait_for()
    page.screenshot(path=str(artifacts / "console-trigger.png"), full_page=True)
    assert live_api.get("/schedules/ops-daily")["fires_count"] == 1
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/ns/default/schedules")
    page.get_by_text("Deleted ops-daily").wait_for()
    assert live_api.get("/schedules/ops-daily")["status"] == "deleted"


def test_a_trigger_that_fails_says_whether_it_was_done(
    live_server, live_api, workflows, page, artifacts
):
    # A refused or unsent trigger used to leave the result area empty: nobody could tell.
    live_api.post(
        "/schedules",
        {"schedule_id": "ops-flaky", "cron": "0 6 * * *", "action": {"workflow": "report"}},
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/ops-flaky")
    result = page.locator("#action-result")
    trigger_url = "**/schedules/ops-flaky/trigger"
    page.route(trigger_url, lambda route: route.abort())
    page.get_by_role("button", name="Trigger now").click()
    expect(result).to_contain_text("Could not tell whether it was done: could not reach the server")
    page.unroute(trigger_url)
    # A refusal: the console's own 404 page for this schedule, answered to the trigger.
    refused = page.request.get(live_server.url + "/ns/default/schedules/no-such-schedule")
    assert refused.status == 404
    page.route(
        trigger_url,
        lambda route: route.fulfill(status=404, body=refused.text(), content_type="text/html"),
    )
    page.get_by_role("button", name="Trigger now").click()
    expect(result).to_contain_text("Not done. Error 404: ")
    expect(result).to_contain_text("no-such-schedule")
    page.screenshot(path=str(artifacts / "console-trigger-refused.png"))
    assert live_api.get("/schedules/ops-flaky")["fires_count"] == 0
    page.unroute(trigger_url)
    page.get_by_role("button", name="Trigger now").click()
    result.get_by_text("schedule:ops-flaky:manual:").wait_for()
    assert live_api.get("/schedules/ops-flaky")["fires_count"] == 1


def test_a_form_typed_across_a_sign_in_elsewhere_keeps_its_text_and_saves(
    live_server, live_api, workflows, page, artifacts
):
    # Signing in again in another tab made this form's token stale: its next preview reloaded
    # the page (everything typed was lost), and Save showed a 400 page.
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/new")
    page.get_by_label("Schedule id").fill("kept-typing")
    page.locator("#workflow").fill("report")
    page.locator("#input").fill('{"mode": "nightly"}')
    # The page's tokens go stale as when the browser signs in again elsewhere (a sign-in in a
    # second page does that only when the session's token was rotated, which depends on what
    # the shared server saw before: so the stale token is set here).
    page.evaluate(
        "for (const input of document.querySelectorAll('input[name=csrf_token]'))"
        " input.value = 'IjAwMDAi.stale.token'"
    )
    page.get_by_label("Cron expressions").fill("15 4 * * *")
    renewed = page.get_by_text("it was renewed")
    renewed.first.wait_for()
    page.screenshot(path=str(artifacts / "console-form-token-renewed.png"), full_page=True)
    assert page.get_by_label("Schedule id").input_value() == "kept-typing"
    page.get_by_label("Time zone").fill("UTC")  # the next change brings the preview back
    page.locator("#preview").get_by_text("04:15:00").first.wait_for()
    page.get_by_role("button", name="Create schedule").click()
    page.wait_for_url("**/schedules/kept-typing")
    assert live_api.get("/schedules/kept-typing")["spec"]["cron_expressions"] == ["15 4 * * *"]


def _open_daily_schedule(live_server, live_api, page, schedule_id: str) -> str:
    """A schedule at 06:00 every day, its page open in a signed-in tab; returns its URL."""
    live_api.post(
        "/schedules",
        {"schedule_id": schedule_id, "cron": "0 6 * * *", "action": {"workflow": "report"}},
    )
    sign_in(page, live_server)
    url = live_server.url + f"/ns/default/schedules/{schedule_id}"
    page.goto(url)
    return url


def _sign_out_in_another_tab(page, url: str):
    """Open `url` in a second tab of the same browser and sign out there; returns that tab."""
    other = page.context.new_page()
    other.goto(url)
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_url("**/login**")
    return other


def test_the_schedule_pages_previews_pause_in_place_after_signing_out_elsewhere(
    live_server, live_api, workflows, page, artifacts
):
    # The backfill count said the preview was paused and what was typed kept; changing the
    # simulation's run length then sent the whole tab to sign-in, and From came back empty.
    url = _open_daily_schedule(live_server, live_api, page, "ops-paused")
    simulation = page.locator("#simulation")
    simulation.locator("[data-sim=started]").wait_for()
    other = _sign_out_in_another_tab(page, url)
    page.get_by_label("From (inclusive, UTC ISO-8601)").fill("2026-03-01T00:00:00Z")
    page.get_by_label("To (exclusive)").fill("2026-03-03T00:00:00Z")
    paused = "Your session ended, so the preview is paused."
    expect(page.locator("#backfill-count")).to_contain_text(paused)
    page.get_by_label("if every run took").fill("30")
    expect(simulation).to_contain_text(paused)
    page.screenshot(path=str(artifacts / "console-schedule-previews-paused.png"), full_page=True)
    assert page.url == url
    assert page.get_by_label("From (inclusive, UTC ISO-8601)").input_value() == (
        "2026-03-01T00:00:00Z"
    )
    assert page.get_by_label("if every run took").input_value() == "30"
    # Signed in again in the other tab: the next change simulates again, on the same page.
    sign_in(other, live_server)
    page.get_by_label("if every run took").fill("45")
    simulation.locator("[data-sim=started]").wait_for()
    assert page.url == url
    assert page.get_by_label("To (exclusive)").input_value() == "2026-03-03T00:00:00Z"
    other.close()


def test_history_modal_loads_every_page(live_server, live_api, workflows, page, artifacts):
    live_api.post(
        "/schedules",
        {"schedule_id": "busy", "cron": "*/5 * * * *", "action": {"workflow": "report"}},
    )
    revision = 1
    for index in range(249):  # 1 created + 249 pause/resume events = 250
        verb = "pause" if index % 2 == 0 else "resume"
        live_api.post(f"/schedules/busy/{verb}", {}, **{"If-Match": str(revision)})
        revision += 1
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules")  # sign-in lands on the overview
    opener = page.locator("#history-open-busy")
    opener.click()
    modal = page.locator("#modal")
    modal.locator("li.event").nth(99).wait_for()
    assert page.evaluate("document.activeElement.id") == "modal-title"
    assert modal.locator("li.event").count() == 100
    for expected in (200, 250):
        modal.get_by_role("button", name="Load more").click()
        modal.locator("li.event").nth(expected - 1).wait_for()
        assert modal.locator("li.event").count() == expected
    assert modal.get_by_role("button", name="Load more").count() == 0
    assert modal.locator("li.event").last.get_attribute("data-sequence") == "250"
    page.screenshot(path=str(artifacts / "console-history-modal.png"))
    # The list refreshes itself every 5 s behind the open modal; wait for that request.
    with page.expect_response(
        lambda r: (
            r.url.split("?")[0].endswith("/ns/default/schedules")
            and r.request.headers.get("hx-request") == "true"
        ),
        timeout=15_000,
    ):
        pass
    page.wait_for_load_state("networkidle")
    assert modal.is_visible() and modal.locator("li.event").count() == 250
    page.keyboard.press("Escape")
    assert not modal.is_visible()
    # Focus moves back in the dialog's `close` event, a task after the key press: wait for it.
    expect(page.locator("#history-open-busy")).to_be_focused()


def test_revision_conflict_between_two_browsers(
    live_server, live_api, workflows, browser, artifacts
):
    live_api.post(
        "/schedules",
        {"schedule_id": "shared", "cron": "0 9 * * *", "action": {"workflow": "report"}},
    )
    first = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    second = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    for page in (first, second):
        sign_in(page, live_server)
        page.goto(live_server.url + "/ns/default/schedules/shared/edit")
    first.get_by_label("Notes").fill("first editor")
    first.get_by_role("button", name="Save changes").click()
    first.wait_for_url("**/schedules/shared")
    second.get_by_label("Cron expressions").fill("0 10 * * *")
    second.get_by_role("button", name="Save changes").click()
    conflict = second.locator(".conflict")
    conflict.wait_for()
    assert "Someone else changed this schedule" in conflict.inner_text()
    assert "revision 2" in conflict.inner_text() and "Notes" in conflict.inner_text()
    second.screenshot(path=str(artifacts / "console-conflict.png"), full_page=True)
    conflict.get_by_role("link", name="Reload the current version").click()
    assert second.get_by_label("Notes").input_value() == "first editor"
    assert live_api.get("/schedules/shared")["spec"]["cron_expressions"] == ["0 9 * * *"]
    first.context.close()
    second.context.close()


def test_an_edit_keeps_the_notes_and_labels_it_did_not_touch(
    live_server, live_api, workflows, page
):
    # Values the API accepts but the form's text cannot say: edge spaces, a leading blank line,
    # a label value holding a line break. Saving another field must leave them as they were.
    notes = "\n  lead line\r\n\n\ttrail \r "
    labels = {"a": " v ", "multi": "next\nline", "crlf": "a\r\nb", "cr": "a\rb"}
    live_api.post(
        "/schedules",
        {
            "schedule_id": "odd",
            "cron": "0 9 * * *",
            "action": {"workflow": "report"},
            "notes": notes,
            "labels": labels,
        },
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/odd/edit")
    # The browser shows every line end as LF.
    assert page.get_by_label("Notes").input_value() == notes.replace("\r\n", "\n").replace(
        "\r", "\n"
    )
    page.get_by_label("Cron expressions").fill("0 10 * * *")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url("**/schedules/odd")
    saved = live_api.get("/schedules/odd")
    assert saved["spec"]["cron_expressions"] == ["0 10 * * *"] and saved["revision"] == 2
    assert saved["notes"] == notes and saved["labels"] == labels
    # Typed notes are the operator's: their line breaks are stored as LF, their edges trimmed.
    page.goto(live_server.url + "/ns/default/schedules/odd/edit")
    page.get_by_label("Notes").fill(" one\ntwo ")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url("**/schedules/odd")
    saved = live_api.get("/schedules/odd")
    assert saved["notes"] == "one\ntwo" and saved["labels"] == labels


def test_signal_completes_waiting_run(live_server, live_api, workflows, page, artifacts):
    run = live_api.post("/runs", {"workflow": "approval", "run_id": "approve-1"})
    live_api.work()
    assert live_api.get("/runs/approve-1")["status"] == "waiting"
    sign_in(page, live_server)
    page.goto(live_server.url + f"/ns/default/runs/{run['run_id']}")
    assert "signal of wait-approve" in page.locator(".deadlines").inner_text()
    page.get_by_label("Signal name").fill("approve")
    page.get_by_label("Payload").fill('{"by": "admin"}')
    page.get_by_role("button", name="Send signal").click()
    page.get_by_text("Signal 'approve': delivered").wait_for()
    live_api.work()
    page.reload()
    assert "completed" in page.locator(".headline").inner_text()
    assert "signal_received" in page.locator(".timeline").inner_text()
    page.screenshot(path=str(artifacts / "console-run-detail.png"), full_page=True)


def test_task_inbox_completes_task(live_server, live_api, workflows, page, artifacts):
    live_api.post("/runs", {"workflow": "review", "run_id": "review-1"})
    live_api.work()
    sign_in(page, live_server)
    page.get_by_role("link", name="Tasks", exact=True).click()
    task = page.locator("article.task", has_text="Check totals")
    task.get_by_label("Output").fill('{"ok": true}')
    page.screenshot(path=str(artifacts / "console-task-inbox.png"), full_page=True)
    task.get_by_role("button", name="Complete task").click()
    page.get_by_text("Task completed.").wait_for()
    live_api.work()
    assert live_api.get("/runs/review-1")["status"] == "completed"


def test_a_task_completion_that_fails_says_so_and_keeps_the_output(
    live_server, live_api, workflows, page, artifacts
):
    # The card was replaced by "Could not load this; change an input to try again", output lost.
    live_api.post("/runs", {"workflow": "review", "run_id": "review-unsent"})
    live_api.work()
    sign_in(page, live_server)
    page.get_by_role("link", name="Tasks", exact=True).click()
    task = page.locator("article.task", has_text="review-unsent")
    task.get_by_label("Output").fill('{"ok": "typed"}')
    page.route("**/tasks/*/complete", lambda route: route.abort())
    task.get_by_role("button", name="Complete task").click()
    expect(task.locator(".request-outcome")).to_contain_text(
        "Could not tell whether it was done: could not reach the server"
    )
    assert task.get_by_label("Output").input_value() == '{"ok": "typed"}'
    page.screenshot(path=str(artifacts / "console-task-unsent.png"), full_page=True)
    page.unroute("**/tasks/*/complete")
    task.get_by_role("button", name="Complete task").click()
    page.get_by_text("Task completed.").wait_for()


def test_load_chart_shows_busiest_slots(live_server, live_api, workflows, page, artifacts):
    for index in range(3):
        live_api.post(
            "/schedules",
            {
                "schedule_id": f"top-of-hour-{index}",
                "cron": "0 * * * *",
                "action": {"workflow": "report"},
            },
        )
    sign_in(page, live_server)
    page.get_by_role("link", name="Load", exact=True).click()
    chart = page.locator("figure.chart svg")
    # The click returns once the Load page is committed, not yet parsed: wait for its bars.
    expect(chart.locator("rect.busiest")).not_to_have_count(0)
    assert "runs starting in the next 24 h" in page.locator("figcaption").inner_text()
    page.screenshot(path=str(artifacts / "console-load.png"), full_page=True)


def test_schedule_notes_keep_their_line_breaks(live_server, live_api, workflows, page, artifacts):
    # Multi-line notes ran together into one paragraph under the title.
    notes = "Owner: billing team\nRunbook: wiki/nightly\n<b>not bold</b>"
    live_api.post(
        "/schedules",
        {
            "schedule_id": "noted",
            "cron": "0 6 * * *",
            "action": {"workflow": "report"},
            "notes": notes,
        },
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/noted")
    shown = page.locator(".notes")
    assert shown.inner_text() == notes
    assert shown.locator("b").count() == 0  # still text, never markup
    assert shown.bounding_box()["height"] > 2.5 * page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('.notes')).fontSize)"
    )
    page.screenshot(path=str(artifacts / "console-notes.png"))


@pytest.mark.parametrize("failure", ["500", "abort"])
def test_a_form_preview_that_fails_replaces_its_stale_results(
    live_server, live_api, workflows, page, artifacts, failure
):
    # The previews kept the old cron's fires and counts after a failed request, and the top of
    # the page spoke of an action ("Not done. Error 500.") for what only reads.
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/new")
    page.locator("#workflow").fill("report")
    page.get_by_label("Cron expressions").fill("0 6 * * *")
    preview, simulation = page.locator("#preview"), page.locator("#form-simulation")
    preview.get_by_text("06:00:00 UTC").first.wait_for()
    simulation.locator("[data-sim=started]").wait_for()

    def fail(route):
        if failure == "abort":
            route.abort()
        else:
            route.fulfill(status=500, body="<h1>Internal error</h1>", content_type="text/html")

    page.route("**/calendar/preview", fail)
    page.route("**/schedules/simulate-form", fail)
    page.get_by_label("Cron expressions").fill("0 7 * * *")
    notice = "Could not load this; change an input to try again."
    expect(preview).to_have_text(notice)
    expect(simulation).to_have_text(notice)
    assert page.locator("#request-failed").count() == 0
    assert "Not done" not in page.locator("main").inner_text()
    assert "Could not tell whether it was done" not in page.locator("main").inner_text()
    page.screenshot(path=str(artifacts / f"console-form-preview-{failure}.png"), full_page=True)
    page.unroute("**/calendar/preview")
    page.unroute("**/schedules/simulate-form")
    page.get_by_label("Cron expressions").fill("0 8 * * *")
    preview.get_by_text("08:00:00 UTC").first.wait_for()
    simulation.locator("[data-sim=started]").wait_for()


def test_a_background_failure_tells_the_time_in_utc_and_what_happens_next(
    live_server, live_api, workflows, page, artifacts
):
    # The notice read "at 7:28:34 PM" (the browser's 12-hour local time) and promised that a page
    # which never refreshes itself "keeps trying"; the backfill count kept its placeholder.
    live_api.post(
        "/schedules",
        {"schedule_id": "ops-count", "cron": "0 6 * * *", "action": {"workflow": "report"}},
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/ops-count")
    page.route(
        "**/backfill/count*",
        lambda route: route.fulfill(status=500, body="Internal error", content_type="text/html"),
    )
    page.get_by_label("From (inclusive, UTC ISO-8601)").fill("2026-03-01T00:00:00Z")
    page.get_by_label("To (exclusive)").fill("2026-03-02T00:00:00Z")
    count = page.locator("#backfill-count")
    expect(count).to_have_text("Could not load this; change an input to try again.")
    assert page.locator("#request-failed").count() == 0
    page.unroute("**/backfill/count*")
    page.get_by_label("To (exclusive)").fill("2026-03-03T00:00:00Z")
    expect(count).to_contain_text("This range holds 2 occurrences")

    # The list refreshes itself every 5 s: its failure says so, at a 24-hour UTC time.
    def refresh_fails(route):
        if route.request.headers.get("hx-request") == "true":
            route.fulfill(status=500, body="Internal error", content_type="text/html")
        else:
            route.continue_()

    page.route("**/ns/default/schedules", refresh_fails)
    page.goto(live_server.url + "/ns/default/schedules")
    notice = page.locator("#request-failed")
    expect(notice).to_contain_text("It keeps trying.", timeout=15_000)
    text = notice.inner_text()
    assert re.search(r"Could not update this page at \d\d:\d\d:\d\d UTC \(Error 500", text), text
    assert "AM" not in text and "PM" not in text and "where it refreshes itself" not in text
    page.screenshot(path=str(artifacts / "console-refresh-failed.png"))
    page.unroute("**/ns/default/schedules")
    expect(notice).to_have_count(0, timeout=15_000)


def test_trigger_and_backfill_refresh_what_they_changed_on_the_schedule_page(
    live_server, live_api, workflows, page, artifacts
):
    # The result line said "triggered: run …" while the counters, the ledger and the recent
    # runs still showed nothing until a reload.
    live_api.post(
        "/schedules",
        {
            "schedule_id": "ops-refresh",
            "cron": "0 6 * * *",
            "overlap_policy": "allow_all",
            "action": {"workflow": "report"},
        },
    )
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/ops-refresh")
    config, ledger, runs = (
        page.locator("section.card", has=page.get_by_role("heading", name=name, exact=True))
        for name in ("Configuration", "Occurrence ledger", "Recent runs")
    )
    expect(config).to_contain_text("0 started")
    expect(runs).to_contain_text("No runs yet.")
    page.get_by_role("button", name="Trigger now").click()
    page.locator("#action-result").get_by_text("schedule:ops-refresh:manual:").wait_for()
    expect(config).to_contain_text("1 started")
    expect(config.locator("dd", has_text="just now")).to_have_count(1)  # last fired
    expect(ledger).to_contain_text("manual")
    expect(runs).to_contain_text("schedule:ops-refresh:manual:")
    page.get_by_label("From (inclusive, UTC ISO-8601)").fill("2026-03-01T00:00:00Z")
    page.get_by_label("To (exclusive)").fill("2026-03-03T00:00:00Z")
    expect(page.locator("#backfill-count")).to_contain_text("This range holds 2 occurrences")
    page.get_by_role("button", name="Backfill").click()
    expect(page.locator("#action-result")).to_contain_text("Backfill started 2 runs")
    expect(config).to_contain_text("3 started")
    expect(runs).to_contain_text("schedule:ops-refresh:backfill:20260301T060000Z")
    expect(ledger).to_contain_text("backfill")
    # What was typed into the backfill form stays.
    assert page.get_by_label("To (exclusive)").input_value() == "2026-03-03T00:00:00Z"
    page.screenshot(path=str(artifacts / "console-trigger-refresh.png"), full_page=True)


def test_a_backfill_posted_after_signing_out_elsewhere_comes_back_counted(
    live_server, live_api, workflows, page, artifacts
):
    # The range came back after sign-in, but the count under it said "Enter a range" until a
    # field was changed.
    url = _open_daily_schedule(live_server, live_api, page, "ops-kept")
    page.get_by_label("From (inclusive, UTC ISO-8601)").fill("2026-03-01T00:00:00Z")
    page.get_by_label("To (exclusive)").fill("2026-03-04T00:00:00Z")
    count = page.locator("#backfill-count")
    expect(count).to_contain_text("This range holds 3 occurrences")
    _sign_out_in_another_tab(page, url).close()
    page.get_by_role("button", name="Backfill").click()
    page.wait_for_url("**/login**")
    page.get_by_label("Username").fill(live_server.username)
    page.get_by_label("Password").fill(live_server.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(url)
    expect(page.get_by_role("alert").filter(has_text="not started")).to_have_count(1)
    assert page.get_by_label("To (exclusive)").input_value() == "2026-03-04T00:00:00Z"
    expect(count).to_contain_text("This range holds 3 occurrences")
    page.screenshot(path=str(artifacts / "console-backfill-kept-counted.png"), full_page=True)
    assert live_api.get("/schedules/ops-kept/occurrences")["items"] == []


def test_the_ledger_on_a_phone_shows_no_label_without_a_value(
    live_server, live_api, workflows, page, artifacts
):
    # Stacked at 390 px, a started occurrence read "Through:" and "Reason:" with nothing after.
    url = _open_daily_schedule(live_server, live_api, page, "ops-phone")
    page.get_by_role("button", name="Trigger now").click()
    page.locator("#action-result").get_by_text("schedule:ops-phone:manual:").wait_for()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    row = page.locator("table[aria-label='Occurrence ledger'] tbody tr").first
    expect(row.locator("td[data-label=Kind]")).to_be_visible()
    expect(row.locator("td[data-label=Run]")).to_be_visible()
    for empty in ("Through", "Reason"):
        expect(row.locator(f"td[data-label={empty}]")).to_be_hidden()
    page.screenshot(path=str(artifacts / "console-ledger-phone.png"), full_page=True)
