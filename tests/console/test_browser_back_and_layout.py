"""In Chromium: the filter boxes after Back, the top bar's line and the form's instant boxes."""

from __future__ import annotations

import pytest

from tests.console.conftest import sign_in

pytestmark = pytest.mark.browser


def test_after_back_the_filter_boxes_show_the_urls_filters(live_server, live_api, page, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules")
    page.locator("#f-status").select_option("paused")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/schedules?status=paused*")
    page.locator("#f-status").select_option("blocked")
    page.locator("#f-q").fill("billing")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=blocked*q=billing*")
    page.go_back()
    page.wait_for_url("**/schedules?status=paused*")
    page.wait_for_load_state("load")
    page.screenshot(path=str(artifacts / "console-filters-after-back.png"))
    assert "status=paused" in page.url
    assert page.locator("#f-status").input_value() == "paused"
    assert page.locator("#f-q").input_value() == ""
    page.go_forward()
    page.wait_for_url("**status=blocked*")
    page.wait_for_load_state("load")
    assert page.locator("#f-status").input_value() == "blocked"
    assert page.locator("#f-q").input_value() == "billing"


def test_the_top_bar_keeps_one_line_at_1280_in_either_time_display(
    live_server, live_api, page, artifacts
):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules")
    for _ in range(2):  # UTC, then the schedule zone ("Times: schedule zone ⇄", the longer)
        bar = page.locator(".topbar").bounding_box()
        sign_out = page.get_by_role("button", name="Sign out").bounding_box()
        brand = page.locator(".brand").bounding_box()
        assert bar["height"] < 70, bar
        assert abs(sign_out["y"] + sign_out["height"] / 2 - (brand["y"] + brand["height"] / 2)) < 8
        page.locator(".time-toggle button").click()
        page.wait_for_load_state("load")
    page.locator(".time-toggle button").click()  # back to the schedule zone for the shots
    page.wait_for_load_state("load")
    page.screenshot(path=str(artifacts / "console-topbar-zone-1280.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts / "console-topbar-zone-390.png"))
    page.locator(".time-toggle button").click()  # leave the display as it was
    page.wait_for_load_state("load")


def test_start_and_end_at_show_a_whole_instant_at_1280(live_server, live_api, page, artifacts):
    sign_in(page, live_server)
    page.goto(live_server.url + "/ns/default/schedules/new")
    for box in ("#start_at", "#end_at"):
        page.locator(box).fill("2026-01-01T00:00:00Z")
        width, needed = page.eval_on_selector(box, "e => [e.clientWidth, e.scrollWidth]")
        assert needed <= width, (box, width, needed)
    page.locator("#end_at").fill("")
    placeholder = page.eval_on_selector(
        "#end_at",
        "e => { const c = document.createElement('canvas').getContext('2d');"
        " c.font = getComputedStyle(e).font; return [e.clientWidth,"
        " c.measureText(e.placeholder).width] }",
    )
    assert placeholder[1] + 18 <= placeholder[0], placeholder
    page.locator("#start_at").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "console-form-instants-1280.png"))
