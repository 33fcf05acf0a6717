"""The schedules list shows each schedule's last 10 runs as squares linking to them, read with one
statement for the whole page (both databases)."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import event

from app.context import database
from app.db.runs import ACTIVE_RUN_STATUSES, FINAL_RUN_STATUSES
from tests.console.test_pages import sign_in


def squares_of(html: str, schedule_id: str) -> list[tuple[str, str]]:
    """(run href, title) of each square in the schedule's row, in page order."""
    row = re.search(rf'<tr [^>]*data-schedule="{re.escape(schedule_id)}">(.*?)</tr>', html, re.S)
    assert row, schedule_id
    return re.findall(r'<a class="square run-[a-z_]+" href="([^"]+)" title="([^"]+)"', row.group(1))


def test_rows_show_the_last_ten_runs_linking_to_each(h, client):
    activation = h.workflow()
    h.create("many", "* * * * *", activation_id=activation, overlap_policy="allow_all")
    h.create("few", "*/5 * * * *", activation_id=activation, overlap_policy="allow_all")
    h.create("none", "0 3 * * *", activation_id=activation)
    for minute in range(1, 13):
        h.tick(f"12:{minute:02d}")
    h.finish(status="completed")
    many = [run for run in h.runs("many")]
    assert len(many) == 12
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/schedules").get_data(as_text=True)
    shown = squares_of(html, "many")
    newest_ten = [run.run_id for run in many[-10:]]
    assert [href for href, _ in shown] == [f"/ns/default/runs/{run_id}" for run_id in newest_ten]
    assert all(
        title.startswith(f"{rid}: completed")
        for (_, title), rid in zip(shown, newest_ten, strict=True)
    )
    few = [run.run_id for run in h.runs("few")]
    assert [href.rsplit("/", 1)[1] for href, _ in squares_of(html, "few")] == few
    assert len(few) == 2
    assert squares_of(html, "none") == []
    assert "no runs yet" in html
    # Each square's link opens that run.
    target = client.get(shown[-1][0])
    assert target.status_code == 200 and newest_ten[-1] in target.get_data(as_text=True)


def test_statuses_colour_the_squares(h, client):
    activation = h.workflow()
    h.create("mixed", "* * * * *", activation_id=activation, overlap_policy="allow_all")
    for minute in (1, 2, 3):
        h.tick(f"12:{minute:02d}")
    first, second, _third = (run.run_id for run in h.runs("mixed"))
    h.finish(first, "failed")
    h.finish(second, "completed")
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/schedules").get_data(as_text=True)
    classes = re.findall(r'<a class="square (run-[a-z_]+)"', html)
    assert classes == ["run-failed", "run-completed", "run-pending"]


def test_one_statement_reads_the_runs_of_the_whole_page(h, app, client):
    activation = h.workflow()
    for index in range(6):
        h.create(f"s{index}", "* * * * *", activation_id=activation, overlap_policy="allow_all")
    for minute in (1, 2):
        h.tick(f"12:{minute:02d}")
    sign_in(client, "olga", "pw-olga-secret")
    statements: list[str] = []
    engine = database(app).engine

    def record(_conn, _cursor, statement, *_args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        html = client.get("/ns/default/schedules").get_data(as_text=True)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert html.count('class="square run-') == 12
    reading_runs = [s for s in statements if re.search(r"\bFROM runs\b", s)]
    assert len(reading_runs) == 1, reading_runs


def test_every_run_status_has_its_own_square_style_and_the_title_says_created(h, client):
    """A suspended run (open incident) fell back to the grey of a stopped one; each status of a
    run now has a rule, and a square's title names when the run was made, not when it began."""
    css = Path(__file__).resolve().parents[2].joinpath("static", "app.css").read_text()
    styled = set(re.findall(r"a\.square\.run-([a-z_]+)", css))
    assert set(ACTIVE_RUN_STATUSES) | set(FINAL_RUN_STATUSES) <= styled
    suspended = re.search(r"a\.square\.run-suspended \{([^}]*)\}", css)
    assert suspended and "outline" in suspended.group(1) and "--o-progress" in suspended.group(1)
    activation = h.workflow()
    h.create("titled", "* * * * *", activation_id=activation, overlap_policy="allow_all")
    h.tick("12:01")
    sign_in(client, "olga", "pw-olga-secret")
    [(_, title)] = squares_of(client.get("/ns/default/schedules").get_data(as_text=True), "titled")
    assert title.endswith("created 2026-01-05 12:01:00 UTC"), title


def test_every_status_badge_has_its_colours_in_the_dark_theme_too():
    """A suspended run's badge was red in the light theme and fell back to the grey of a
    cancelled one in the dark theme: each status coloured in one theme is coloured in both."""
    css = Path(__file__).resolve().parents[2].joinpath("static", "app.css").read_text()
    begin = css.index("{", css.index("@media (prefers-color-scheme: dark)"))
    depth, end = 0, begin
    while True:
        depth += {"{": 1, "}": -1}.get(css[end], 0)
        if depth == 0:
            break
        end += 1
    light, dark = css[:begin] + css[end:], css[begin:end]

    def fixed_colours(rule: str) -> bool:
        """Colours written out: the dark theme must restate them (a `var()` follows it)."""
        return "#" in re.sub(r"var\([^)]*\)", "", rule.partition("{")[2])

    light_statuses = {
        status
        for rule in light.split("}")
        if fixed_colours(rule)
        for status in re.findall(r"\.status-([a-z_]+)", rule.partition("{")[0])
    }
    dark_statuses = set(re.findall(r"\.status-([a-z_]+)", dark))
    assert {"suspended", "failed", "cancelled"} <= light_statuses
    assert light_statuses <= dark_statuses, sorted(light_statuses - dark_statuses)
