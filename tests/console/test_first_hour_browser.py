"""The first hour in Debian Chromium against a real gunicorn (issue 9): the backfill count, the
history modal by keyboard, the runs filter, the schedule form's errors, the task inbox and the
load chart, each photographed at 1280 and 390 px under tests/artifacts/."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.console.conftest import sign_in

pytestmark = pytest.mark.browser
WIDTHS = (1280, 390)


@pytest.fixture(scope="module")
def flows(live_api):
    live_api.deploy("fh-report", [{"id": "a", "type": "action", "action": "noop"}])
    wait = {"id": "wait", "type": "signal", "signal": "go", "timeout_seconds": 86400}
    live_api.deploy("fh-wait", [wait | {"on_timeout": "fail"}])
    live_api.deploy(
        "fh-review",
        [
            {
                "id": "check",
                "type": "task",
                "title": "Approve the totals",
                "role": "operator",
                "timeout_seconds": 86400,
                "on_timeout": "fail",
            }
        ],
    )
    return "fh-report"


def _shots(page, artifacts, name):
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        page.screenshot(path=str(artifacts / f"first-hour-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_backfill_count_asks_nothing_while_typing_and_names_the_skips(
    live_server, live_api, flows, page, artifacts
):
    live_api.post(
        "/schedules", {"schedule_id": "fh-backfill", "cron": "0 * * * *", "workflow": "fh-wait"}
    )
    live_api.post("/schedules/fh-backfill/trigger", {})  # a waiting run: `skip` refuses others
    dialogs, urls = [], []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.on("request", lambda request: urls.append(request.url))
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/fh-backfill")
    page.get_by_label("From (inclusive, UTC ISO-8601)").type("2026-03-07T06:00:00Z", delay=5)
    page.get_by_label("To (exclusive)").type("2026-03-07T10:00:00Z", delay=5)
    count = page.locator("#backfill-count")
    count.get_by_text("This range holds 4 occurrences").wait_for()
    assert "0 runs would start" in count.inner_text()
    assert "4 skipped by the overlap policy" in count.inner_text()
    assert dialogs == []
    counted = [url for url in urls if "/backfill/count" in url]
    assert counted and not any("csrf_token" in url for url in counted)
    page.get_by_label("Overlap policy for these runs").select_option("allow_all")
    count.get_by_text("4 runs would start").wait_for()
    _shots(page, artifacts, "backfill-count")
    page.get_by_role("button", name="Backfill").click()
    page.locator("#action-result").get_by_text("Backfill started 4 runs").wait_for()
    assert dialogs == ["Start the runs counted above?"]


def test_history_modal_by_keyboard(live_server, live_api, flows, page, artifacts):
    live_api.post(
        "/schedules", {"schedule_id": "fh-busy", "cron": "*/5 * * * *", "workflow": flows}
    )
    for index in range(149):  # created + 149 pause/resume events = 150: two pages
        verb = "pause" if index % 2 == 0 else "resume"
        live_api.post(f"/schedules/fh-busy/{verb}", {}, **{"If-Match": str(index + 1)})
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/fh-busy")
    page.locator("#history-open-detail").focus()
    page.keyboard.press("Enter")
    modal = page.locator("#modal")
    modal.locator("li.event").nth(99).wait_for()
    assert page.evaluate("document.activeElement.id") == "modal-title"
    assert "admin via api: created" in modal.locator("li.event").first.inner_text()
    tabs = 0
    while page.evaluate("document.activeElement.textContent.trim()") != "Load more":
        page.keyboard.press("Tab")
        tabs += 1
        assert tabs <= 5, page.evaluate("document.activeElement.outerHTML")
    page.keyboard.press("Enter")
    modal.locator("li.event").nth(149).wait_for()
    focused = "document.activeElement.closest('li.event')?.dataset.sequence"
    # (expect, not wait_for_function: polling a string expression is an eval the page's CSP
    # refuses.)
    expect(modal.locator("li.event[data-sequence='101'] > details > summary")).to_be_focused()
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "102"
    _shots(page, artifacts, "history-modal")
    page.keyboard.press("Escape")
    page.locator("#history-open-detail").click()
    modal.get_by_role("button", name="Jump to latest").click()
    modal.get_by_role("button", name="From the start").wait_for()
    assert modal.locator("li.event").last.get_attribute("data-sequence") == "150"
    assert modal.locator("li.event").first.get_attribute("data-sequence") == "51"


def test_runs_status_filter_is_a_row_not_a_column(live_server, page, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/runs")
    checks = page.locator("fieldset.checks")
    for width, tallest in ((1280, 60), (390, 160)):
        page.set_viewport_size({"width": width, "height": 844})
        box = checks.bounding_box()
        assert box is not None and box["height"] <= tallest, (width, box)
        first = page.locator("fieldset.checks input").first.bounding_box()
        assert first is not None and first["width"] < 40
    _shots(page, artifacts, "runs-filter")


def test_schedule_form_reports_every_mistake_at_once(live_server, flows, page, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/new")
    preview = page.locator("#preview")
    preview.get_by_text("Type a cron expression or an interval").wait_for()
    assert page.locator(".preview-error").count() == 0
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_label("Schedule id").fill("fh-form")
    page.get_by_label("Cron expressions").fill("0 25 * * *")
    page.get_by_label("Time zone").fill("america/new_york")
    page.locator("#workflow").fill(flows)
    page.locator("#input").fill("{oops")
    page.locator("#max_runs").fill("0")
    page.locator("#labels").fill("no separator")
    page.get_by_role("button", name="Create schedule").click()
    summary = page.locator("#error-summary")
    summary.wait_for()
    # The summary takes focus once the page has loaded (DOMContentLoaded), which may come a
    # moment after it is first seen.
    expect(summary).to_be_focused()
    assert "5 problems" in summary.inner_text()
    assert summary.locator("a").count() == 5
    assert "did you mean 'America/New_York'" in summary.inner_text()
    assert page.locator("#input").input_value() == "{oops"
    assert page.locator("#max_runs").input_value() == "0"
    _shots(page, artifacts, "form-errors")
    summary.locator("a[href='#timezone']").click()
    assert page.evaluate("document.activeElement.id") == "timezone"


def test_task_inbox_keeps_what_was_typed(live_server, live_api, flows, page, artifacts):
    for run_id in ("fh-review-1", "fh-review-2"):
        live_api.post("/runs", {"workflow": "fh-review", "run_id": run_id})
    live_api.work()
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/tasks")
    cards = page.locator("article.task", has_text="Approve the totals")
    first, second = cards.nth(0), cards.nth(1)
    top, below = first.bounding_box(), second.bounding_box()
    assert below["y"] - (top["y"] + top["height"]) >= 8, (top, below)  # the cards do not touch
    second.locator("textarea").fill('{"note": "half typed"}')
    first.locator("textarea").fill('{"approved": tru')
    first.get_by_role("button", name="Complete task").click()
    page.locator(".field-error").wait_for()
    first = page.locator("article.task", has=page.locator(".field-error"))
    assert first.locator("textarea").input_value() == '{"approved": tru'
    assert "not valid JSON" in first.locator(".field-error").inner_text()
    assert page.locator(".flash-error").count() == 0
    # Refused in place: what was typed into the other task is still there.
    assert second.locator("textarea").input_value() == '{"note": "half typed"}'
    # htmx moves focus to the refused card's [autofocus] field when the swap settles, a few
    # milliseconds after the card is swapped in: wait for it rather than race it.
    refused_id = first.locator("textarea").get_attribute("id")
    expect(first.locator("textarea")).to_be_focused()
    # The caret is after what was typed, so typing goes on from there.
    expect(first.locator("textarea")).to_have_js_property("selectionStart", len('{"approved": tru'))
    page.keyboard.type("e}")
    assert first.locator("textarea").input_value() == '{"approved": true}'
    _shots(page, artifacts, "task-inbox")
    # Completed in place too: the inbox is not reloaded under what was typed into the other.
    card = page.locator(f"article.task:has(#{refused_id})")
    card_id = card.get_attribute("id")
    first.get_by_role("button", name="Complete task").click()
    done = page.locator(f"#{card_id}")
    done.get_by_text("Task completed.").wait_for()
    assert "Status: completed by" in done.inner_text()
    assert done.locator("textarea").count() == 0
    assert second.locator("textarea").input_value() == '{"note": "half typed"}'
    _shots(page, artifacts, "task-inbox-completed")


def test_load_chart_axis_is_readable_on_a_phone(live_server, flows, page, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/load")
    page.set_viewport_size({"width": 390, "height": 844})
    label = page.locator(".chart text.tick").nth(1)
    box = label.bounding_box()
    assert box is not None and box["height"] >= 9, box
    _shots(page, artifacts, "load-chart")


def test_upcoming_fires_labels_are_readable_at_desktop_and_phone_widths(
    live_server, live_api, flows, page, artifacts
):
    live_api.post("/schedules", {"schedule_id": "fh-strip", "cron": "0 * * * *", "workflow": flows})
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/fh-strip")
    card = page.locator("section.card", has=page.get_by_role("heading", name="Upcoming fires"))
    strip = card.locator("figure.chart")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        labels = strip.locator("text.tick")
        assert labels.count() >= 3
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        assert all(box and 9 <= box["height"] <= 24 for box in boxes), (width, boxes)
        # Side by side without overlapping.
        assert all(a["x"] + a["width"] <= b["x"] for a, b in itertools.pairwise(boxes)), boxes
        strip.screenshot(path=str(artifacts / f"first-hour-upcoming-strip-{width}.png"))


CUT_OFF_OPTIONS = """(id) => {
  const select = document.getElementById(id);
  const style = getComputedStyle(select);
  const pen = document.createElement("canvas").getContext("2d");
  pen.font = style.font;
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  const room = select.clientWidth - padding - 20;  // the arrow
  const texts = Array.from(select.options).map((o) => o.text);
  return texts.filter((text) => pen.measureText(text).width > room);
}"""


def test_policy_choices_fit_their_selects(live_server, flows, page):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/new")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        for select in ("overlap_policy", "missed_policy"):
            assert page.evaluate(CUT_OFF_OPTIONS, select) == [], (width, select)
    assert "older occurrences become one skipped range" in page.locator("#missed-help").inner_text()


# What overflows its box (not SVG text): named in a failure, so the fix knows where to look.
OVERFLOWING = """() => [...document.querySelectorAll("body *")]
  .filter((e) => !(e instanceof SVGElement) && e.clientWidth > 0)
  .filter((e) => e.scrollWidth > e.clientWidth + 1)
  .slice(0, 4).map((e) => `${e.tagName}#${e.id} ${e.scrollWidth}/${e.clientWidth}`)"""


def test_long_ids_and_unbroken_text_stay_inside_the_window(
    live_server, live_api, flows, page, artifacts
):
    long_id = "L" * 120 + "-long-id"
    body = {"schedule_id": long_id, "cron": "0 * * * *", "workflow": flows, "notes": "x" * 500}
    live_api.post("/schedules", body | {"labels": {"k" * 60: "v" * 60}})
    live_api.post(f"/schedules/{long_id}/trigger", {})
    sign_in(page, live_server)
    pages = {
        "schedule": f"/ns/default/schedules/{long_id}",
        "list": "/ns/default/schedules?q=long-id",
        "edit": f"/ns/default/schedules/{long_id}/edit",
    }
    for name, path in pages.items():
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(live_server.url + path)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, (name, width, wide, page.evaluate(OVERFLOWING))
            page.screenshot(path=str(artifacts / f"long-id-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_a_long_unbroken_workflow_description_stays_inside_the_workflows_page(
    live_server, live_api, page
):
    live_api.post(
        "/workflows",
        {
            "name": "fh-described",
            "description": "D" * 500,
            "steps": [{"id": "a", "type": "action", "action": "noop"}],
        },
    )
    sign_in(page, live_server)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/ns/default/workflows")
        assert page.get_by_text("D" * 40).first.is_visible()
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, (width, wide, page.evaluate(OVERFLOWING))
    page.set_viewport_size({"width": 1280, "height": 900})


def test_a_long_unbroken_task_title_stays_inside_the_run_page(
    live_server, live_api, page, artifacts
):
    task = {"id": "check", "type": "task", "title": "T" * 256, "timeout_seconds": 86400}
    live_api.deploy("fh-long-task", [task | {"on_timeout": "fail"}])
    live_api.post("/runs", {"workflow": "fh-long-task", "run_id": "long-task"})
    live_api.work()
    sign_in(page, live_server)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/ns/default/runs/long-task")
        assert page.get_by_role("heading", name="Open tasks").is_visible()
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, (width, wide, page.evaluate(OVERFLOWING))
        page.screenshot(path=str(artifacts / f"long-task-title-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


# Each cell of the schedules list whose words break inside (its text is taller than one line
# although no word in it is longer than the cell is wide).
BROKEN_WORDS = """(id) => {
  const row = document.querySelector(`tr[data-schedule='${id}']`);
  const out = [];
  for (const el of row.querySelectorAll("td > a, td > button, td .squares")) {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.3;
    const padding = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom) + 2;
    if (box.height > line * 1.5 + padding) out.push(`${el.className} ${box.width}x${box.height}`);
  }
  return out;
}"""


LABELS = {"team": "ledger", "a-rather-long-label-key": "and-a-rather-long-label-value-too"}


def test_the_schedules_list_keeps_words_and_buttons_whole(
    live_server, live_api, flows, page, artifacts
):
    body = {"schedule_id": "wrap-061", "cron": "0 * * * *", "workflow": flows}
    saved = live_api.post("/schedules", body | {"overlap_policy": "allow_all", "labels": LABELS})
    # A neighbour with a long id widens its column, one with a long calendar its own: the
    # others must not pay with broken words.
    live_api.post("/schedules", body | {"schedule_id": "wrap-0" + "x" * 100})
    calendar = {
        "cron_expressions": ["0 9 * * 1-5", "30 17 * * 5"],
        "intervals": [{"every": "PT6H", "offset": "PT5M"}, {"every": "PT90M"}],
    }
    long_calendar = {"schedule_id": "wrap-0cancel_other", "spec": calendar, "workflow": flows}
    assert live_api.post("/schedules", long_calendar)["schedule_id"] == "wrap-0cancel_other"
    # Ten runs, without moving the shared clock: a backfill of the ten hours before it.
    now = datetime.fromisoformat(saved["created_at"].replace("Z", "+00:00"))
    start = (now - timedelta(hours=10)).replace(minute=0, second=0, microsecond=0)
    window = {"from": start.isoformat(), "to": (start + timedelta(hours=10)).isoformat()}
    backfilled = live_api.post("/schedules/wrap-061/backfill", window)
    assert backfilled["started"] == 10, backfilled
    sign_in(page, live_server)
    for width in (1280, 1920, 2560):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + "/ns/default/schedules?q=wrap-0")
        for row in ("wrap-061", "wrap-0cancel_other"):
            assert page.evaluate(BROKEN_WORDS, row) == [], (width, row)
        page.screenshot(path=str(artifacts / f"schedules-words-{width}.png"))


def test_a_long_namespace_name_never_widens_a_phone_page(live_server, live_api, page, artifacts):
    long_name = "platform-operations-and-infrastructure-team-eu-west"
    live_api.post("/namespaces", {"name": long_name})
    sign_in(page, live_server)
    for width in (375, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(live_server.url + "/ns/default/schedules")
        assert page.locator("#ns-switch option").count() >= 2
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, (width, wide, page.evaluate(OVERFLOWING))
        label = page.locator("label[for='ns-switch']").bounding_box()
        assert label and label["height"] < 30, label  # one line, not a letter per line
        page.screenshot(path=str(artifacts / f"long-namespace-{width}.png"))


def test_the_namespace_switcher_waits_for_enter_from_the_keyboard(live_server, live_api, page):
    # Chromium changes a closed select on ArrowDown: switching at once loaded another
    # namespace before a keyboard user could move past it.
    live_api.post("/namespaces", {"name": "aa-keyboard"})
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules")
    # Count the form submissions a change handler makes (it runs within the key press).
    page.evaluate(
        """() => { const real = HTMLFormElement.prototype.submit; window.__submits = 0;
        HTMLFormElement.prototype.submit = function () { window.__submits += 1;
        return real.call(this); }; }"""
    )
    switcher = page.locator("#ns-switch")
    switcher.focus()
    page.keyboard.press("Home")
    assert switcher.input_value() == "aa-keyboard"
    assert page.evaluate("window.__submits") == 0 and page.url.endswith("/ns/default/schedules")
    page.keyboard.press("Enter")
    page.wait_for_url("**/ns/aa-keyboard/")
    # A pointer still switches in one step.
    page.locator("#ns-switch").click()
    page.locator("#ns-switch").select_option("default")
    page.get_by_role("button", name="Switch").click()
    page.wait_for_url("**/ns/default/")


def test_the_days_chart_keeps_its_proportions_on_a_phone(
    live_server, live_api, flows, page, artifacts
):
    live_api.post("/runs", {"workflow": flows})
    sign_in(page, live_server)
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(live_server.url + "/ns/default/")
    chart = page.locator("figure.chart.outcomes svg").bounding_box()
    assert chart and chart["width"] >= 600, chart
    assert abs(chart["width"] / chart["height"] - 960 / 180) < 0.5, chart
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # The peak label stays inside the chart, and the sideways scroll is reachable by keyboard.
    peak = page.locator("figure.chart.outcomes svg text", has_text="peak").bounding_box()
    assert peak and peak["y"] >= chart["y"], (peak, chart)
    region = page.locator("figure.chart.outcomes .outcomes-scroll")
    assert region.get_attribute("tabindex") == "0" and region.get_attribute("role") == "region"
    page.locator("figure.chart.outcomes").screenshot(path=str(artifacts / "day-chart-375.png"))
