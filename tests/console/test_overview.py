"""The namespace overview: its numbers agree with the API, it refreshes as a partial and stops
polling after an hour, the ticker warning, and sign-in landing on it (both databases)."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete

from app.context import clock, database
from app.db import TickerBeat
from app.runs import engine
from app.runs.overview import OUTCOME_OF
from tests.console.test_pages import sign_in
from tests.support.schedules_harness import at

TASK_STEPS = [{"id": "review", "type": "task", "title": "Check the numbers"}]


def all_items(api, path: str) -> list[dict]:
    items, cursor = [], None
    while True:
        joiner = "&" if "?" in path else "?"
        query = f"{path}{joiner}limit=100" + (f"&cursor={cursor}" if cursor else "")
        body = api.get(query).get_json()
        items += body["items"]
        cursor = body["next_cursor"]
        if not cursor:
            return items


def counts_on(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-count="([^"]+)">([^<]+)<', html))


def chart_on(html: str) -> dict[tuple[str, str], int]:
    """(hour, outcome) -> runs, read from the bars' hover titles."""
    found = re.findall(r"<title>(\d\d:\d\d)–\d\d:00 UTC: (\d+) ([a-z ]+)</title>", html)
    return {(hour, outcome): int(n) for hour, n, outcome in found}


@pytest.fixture
def busy(h, admin_api):
    """Active, paused, blocked and overdue schedules; failed, completed and waiting runs."""
    ready = h.workflow("report")
    retired = h.workflow("legacy")
    for name in ("s1", "s2", "s3"):
        h.create(name, "*/5 * * * *", activation_id=ready)
    h.create("b1", "*/5 * * * *", activation_id=retired)
    assert h.post("s3", "pause", {"reason": "maintenance"}).status_code == 200
    h.retire(retired)
    h.tick("12:05")
    runs = {run.schedule_id: run.run_id for run in h.runs()}
    h.finish(runs["s1"], "failed")
    h.finish(runs["s2"], "completed")
    h.tick("12:10")
    admin_api.post("/workflows", json={"name": "review", "steps": TASK_STEPS})
    admin_api.post("/activations", json={"workflow": "review"})
    admin_api.post("/runs", json={"workflow": "review", "run_id": "review-1"})
    admin_api.post("/admin/tick", json={"work": True})
    # Moved on without a tick: s1 and s2 were due at 12:15 and are now overdue.
    h.set_clock("12:20")
    return h


def test_overview_numbers_agree_with_the_api(busy, client, operator):
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/").get_data(as_text=True)
    shown = counts_on(html)
    for status in ("active", "paused", "blocked"):
        listed = all_items(operator, f"/schedules?status={status}")
        assert shown[status] == str(len(listed)), status
    assert shown["blocked"] == "1" and shown["paused"] == "1"
    now = at("12:20")
    late = [
        item
        for item in all_items(operator, "/schedules?status=active")
        if datetime.fromisoformat(item["next_fire_at"].replace("Z", "+00:00"))
        < now - timedelta(seconds=3)
    ]
    assert shown["overdue"] == str(len(late)) == "2"
    for item in late:
        assert f"/ns/default/schedules/{item['schedule_id']}" in html
    assert "/ns/default/schedules/b1" in html  # the blocked one is named and linked
    assert shown["tasks"] == str(len(all_items(operator, "/tasks?status=open"))) == "1"

    expected: Counter[tuple[str, str]] = Counter()
    for run in all_items(operator, "/runs"):
        created = datetime.fromisoformat(run["created_at"].replace("Z", "+00:00"))
        expected[(created.strftime("%H:00"), OUTCOME_OF[run["status"]])] += 1
    assert chart_on(html) == dict(expected)
    assert sum(expected.values()) == 5  # 2 + 2 scheduled, 1 started by hand
    legend = dict(re.findall(r'data-outcome="([^"]+)">(\d+)<', html))
    per_outcome: Counter[str] = Counter()
    for (_hour, outcome), n in expected.items():
        per_outcome[outcome] += n
    assert {k: int(v) for k, v in legend.items() if int(v)} == dict(per_outcome)
    # The tick's workers completed the 12:10 runs; review-1 waits on its task.
    assert per_outcome == {"completed": 3, "failed": 1, "in progress": 1}


def test_open_incidents_agree_with_the_api(busy, client, admin_api):
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/").get_data(as_text=True)
    assert re.search(r'data-count="incidents">0<', html)
    steps = [{"id": "charge", "type": "action", "action": "fail", "retry": {"max_attempts": 1}}]
    body = {"name": "charge", "steps": steps, "on_step_failure": "incident"}
    assert admin_api.post("/workflows", json=body).status_code == 201
    admin_api.post("/activations", json={"workflow": "charge"})
    for run_id in ("charge-1", "charge-2"):
        admin_api.post("/runs", json={"workflow": "charge", "run_id": run_id})
    admin_api.post("/admin/tick", json={"work": True})
    listed = admin_api.get("/incidents?status=open").get_json()["items"]
    assert len(listed) == 2
    html = client.get("/ns/default/").get_data(as_text=True)
    assert re.search(r'data-count="incidents">2<', html)


def test_partial_refreshes_and_stops_polling_after_an_hour(busy, client):
    sign_in(client, "olga", "pw-olga-secret")
    full = client.get("/ns/default/")
    assert full.status_code == 200 and b"<html" in full.data
    since = re.search(rb"since=(\d+)", full.data)
    assert since, "the polling URL carries the page's load time"
    partial = client.get(
        f"/ns/default/?since={since.group(1).decode()}", headers={"HX-Request": "true"}
    )
    assert partial.status_code == 200
    assert b"<html" not in partial.data and b'data-count="active"' in partial.data
    for response in (full, partial):
        assert "HX-Request" in response.headers["Vary"]
    # The polls themselves keep the session (idle timeout 1 h) alive meanwhile.
    busy.set_clock("12:50")
    assert (
        client.get(
            f"/ns/default/?since={since.group(1).decode()}", headers={"HX-Request": "true"}
        ).status_code
        == 200
    )
    busy.set_clock("13:21")
    late = client.get(
        f"/ns/default/?since={since.group(1).decode()}", headers={"HX-Request": "true"}
    )
    assert late.status_code == 286
    assert b"Live refresh stopped after an hour" in late.data
    # A full page load starts a new hour.
    assert client.get(f"/ns/default/?since={since.group(1).decode()}").status_code == 200


def test_busiest_slots_partial_and_page(busy, client):
    sign_in(client, "olga", "pw-olga-secret")
    full = client.get("/ns/default/overview/busiest")
    partial = client.get("/ns/default/overview/busiest", headers={"HX-Request": "true"})
    assert full.status_code == partial.status_code == 200
    assert b"<html" in full.data and b"<html" not in partial.data
    for response in (full, partial):
        assert "HX-Request" in response.headers["Vary"]
    text = partial.get_data(as_text=True)
    # s1 and s2 are due every 5 minutes: at most two runs per slot, 288 slots in a day.
    assert "<strong>2</strong> runs" in text
    assert "runs are due in the next 24 hours" in text


def test_ticker_health_warns_after_three_silent_periods(app, client, accounts):
    accounts.create("olga")
    sign_in(client, "olga", "pw-olga-secret")
    assert "No ticker has ticked yet" in client.get("/ns/default/").get_data(as_text=True)
    wall = datetime.now(UTC)
    with database(app).session() as session:
        session.add(TickerBeat(ticker_id="t1", last_tick_at=wall, last_tick_clock=wall))
        session.commit()
    fresh = client.get("/ns/default/").get_data(as_text=True)
    assert 'data-ticker="ok"' in fresh and "No ticker has ticked for" not in fresh
    with database(app).session() as session:
        session.execute(delete(TickerBeat))
        old = wall - timedelta(minutes=5)
        session.add(TickerBeat(ticker_id="t1", last_tick_at=old, last_tick_clock=old))
        session.commit()
    stale = client.get("/ns/default/").get_data(as_text=True)
    assert 'data-ticker="stale"' in stale and "No ticker has ticked for 3 periods" in stale
    assert ">5 min ago</time>" in stale  # not "300.0 s ago" (two days read "179912.6 s ago")
    health = client.get("/api/v1/health").get_json()
    shown = re.search(r'data-ticker="stale">Last tick <time datetime="([^"]+)"', stale)
    assert shown and health["ticker"]["last_tick_at"][:19] == shown.group(1)[:19]


def test_sign_in_lands_on_the_overview(client, accounts):
    accounts.create("olga")
    response = sign_in(client, "olga", "pw-olga-secret")
    home = client.get(response.headers["Location"])
    assert home.headers["Location"] == "/ns/default/"
    page = client.get("/ns/default/").get_data(as_text=True)
    assert "<h1>Overview" in page
    # Nothing deployed yet: the page teaches the first step.
    assert "Start with a workflow" in page and "almanac workflows deploy" in page


def test_another_namespace_is_hidden_like_a_missing_one(client, accounts):
    accounts.create("olga", namespace="billing")
    accounts.create("bob", namespace="reports")
    sign_in(client, "olga", "pw-olga-secret")
    for path in ("/ns/reports/", "/ns/reports/overview/busiest", "/ns/nowhere/"):
        assert client.get(path).status_code == 404, path


def _beat_now(app) -> None:
    wall = datetime.now(UTC)
    with database(app).session() as session:
        session.add(TickerBeat(ticker_id="t1", last_tick_at=wall, last_tick_clock=wall))
        session.commit()


def test_a_schedule_held_by_the_run_limit_is_held_not_overdue(h, app, client):
    # The ticker decided its occurrence every tick (refused: capacity): pointing at the
    # ticker as overdue hid the real cause, the namespace's run limit.
    h.set_limit(1)
    h.create("busy", "* * * * *", overlap_policy="allow_all")
    assert [r["outcome"] for r in h.tick("12:01")] == ["triggered"]
    assert [r["outcome"] for r in h.tick("12:02")] == ["refused"]
    h.set_clock("12:02:30")
    _beat_now(app)
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/").get_data(as_text=True)
    shown = counts_on(html)
    assert (shown["overdue"], shown["held"]) == ("0", "1")
    assert "Held by the run limit" in html and "run limit (1 active)" in html
    assert "/ns/default/schedules/busy" in html
    verdict = re.search(r'data-verdict="attention">(.*?)</p>', html)
    assert verdict
    named = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', verdict.group(1))
    # Its one active run has waited since 12:01 with no worker taking it: also named.
    assert named == [
        ("t-overdue", "1 schedule held by the run limit"),
        ("t-workers", "1 step waiting over a minute for a worker"),
    ]


def test_the_first_line_says_whether_everything_is_fine(busy, app, client, operator):
    _beat_now(app)
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/").get_data(as_text=True)
    verdict = re.search(r'data-verdict="attention">(.*?)</p>', html)
    assert verdict, html[:2000]
    named = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', verdict.group(1))
    assert named == [
        ("t-overdue", "2 schedules overdue"),
        ("t-blocked", "1 schedule blocked"),
        ("t-runs", "1 run failed in the last 24 h"),
    ]
    for anchor, _text in named:
        assert f'id="{anchor}"' in html


def test_a_namespace_with_nothing_wrong_says_everything_is_fine(app, client, accounts):
    accounts.create("olga")
    sign_in(client, "olga", "pw-olga-secret")
    stale = client.get("/ns/default/").get_data(as_text=True)
    assert "the ticker is not ticking" in stale  # no ticker has ticked yet
    _beat_now(app)
    fine = client.get("/ns/default/").get_data(as_text=True)
    assert 'data-verdict="fine"' in fine and 'data-verdict="attention"' not in fine


def _verdict(client) -> tuple[str, list[tuple[str, str]]]:
    html = client.get("/ns/default/").get_data(as_text=True)
    verdict = re.search(r'data-verdict="(fine|attention)">(.*?)</p>', html)
    assert verdict, html[:2000]
    return html, re.findall(r'<a href="#([^"]+)">([^<]+)</a>', verdict.group(2))


def test_steps_no_worker_takes_are_named_with_the_command_that_starts_one(
    app, client, operator, scenario
):
    """Runs pile up unseen when no worker serves their queue: past a minute ready, the first
    line names them, and the Workers tile gives each queue's command (branch steps count)."""
    noop = {"type": "action", "action": "noop"}
    branches = [{"id": b, "steps": [{"id": f"{b}-1", **noop}]} for b in ("a", "b")]
    scenario.deploy("fanned", [{"id": "fan", "type": "parallel", "branches": branches}])
    scenario.deploy("plain", [{"id": "only", **noop}])
    scenario.start("fanned", run_id="fan-1", queue="reports")
    db, clk = database(app), clock(app)
    # A worker of that queue takes the parallel step once, which starts both branches.
    reports = engine.WorkerSettings(name="reports", queue="reports", batch=1)
    assert engine.work_once(db, clk, reports) == 1
    assert scenario.types("fan-1").count("branch_started") == 2
    scenario.start("plain", run_id="plain-1")
    _beat_now(app)
    sign_in(client, "olga", "pw-olga-secret")
    scenario.advance(seconds=59)
    html, named = _verdict(client)
    assert named == [] and 'data-workers="ok"' in html
    scenario.advance(seconds=2)
    html, named = _verdict(client)
    assert named == [("t-workers", "3 steps waiting over a minute for a worker")]
    assert counts_on(html)["waiting"] == "3"
    commands = re.findall(r'<li data-queue="([^"]+)"><code>([^<]+)</code>', html)
    assert commands == [
        ("reports", "flask --app wsgi worker --queue reports"),
        ("default", "flask --app wsgi worker"),
    ]
    # `--queue default` takes the default queue (a run with no queue), as the tile says.
    default = engine.WorkerSettings(name="default", queue="default")
    assert engine.work_once(db, clk, default) == 1
    assert scenario.run("plain-1")["status"] == "completed"
    html, named = _verdict(client)
    assert named == [("t-workers", "2 steps waiting over a minute for a worker")]
    assert re.findall(r'<li data-queue="([^"]+)">', html) == ["reports"]
    while engine.work_once(db, clk, reports):
        pass
    assert scenario.run("fan-1")["status"] == "completed"
    html, named = _verdict(client)
    assert 'data-verdict="fine"' in html and 'data-workers="ok"' in html
