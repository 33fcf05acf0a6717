"""A long run's page lists the first 50 history events; `Load more` appends the next pages as
an htmx partial, and the same URL without htmx is a page of its own (both databases)."""

from __future__ import annotations

import re

from app.ticker.tick import run_tick
from tests.console.test_pages import sign_in

LONG = {
    "name": "long",
    "steps": [
        {
            "id": f"step-{n:02d}",
            "type": "action",
            "action": "echo",
            "args": {"n": n, "note": "<b>x</b>"},
        }
        for n in range(60)
    ],
}


def sequences(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<span class="seq">#(\d+)</span>', html)]


def more_url(html: str) -> str | None:
    found = re.search(r'id="run-history-more".*?hx-get="([^"]+)"', html, re.S)
    return found.group(1).replace("&amp;", "&") if found else None


def test_long_history_loads_in_pages(app, client, accounts, api_for):
    api = api_for("dora", "admin")
    assert api.post("/workflows", json=LONG).status_code == 201
    assert api.post("/activations", json={"workflow": "long"}).status_code == 201
    assert api.post("/runs", json={"workflow": "long", "run_id": "long-1"}).status_code == 201
    for _ in range(50):
        run_tick(app, work=True)
        if api.get("/runs/long-1").get_json()["status"] == "completed":
            break
    everything, cursor = [], ""
    while cursor is not None:
        body = api.get(f"/runs/long-1/history?limit=100{cursor}").get_json()
        everything += [event["sequence"] for event in body["items"]]
        cursor = f"&cursor={body['next_cursor']}" if body["next_cursor"] else None
    assert len(everything) > 100  # more than two pages
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)

    page = client.get("/ns/default/runs/long-1").get_data(as_text=True)
    assert sequences(page) == everything[:50]
    assert page.count('class="step-bar ') == 60, "the Gantt chart still draws every step"
    assert len(re.findall(r'<tr id="step-', page)) == 60
    # Outputs written into the steps table are escaped like the rest of the page.
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    seen, url = sequences(page), more_url(page)
    while url:
        partial = client.get(url, headers={"HX-Request": "true"})
        assert partial.status_code == 200 and "HX-Request" in partial.headers["Vary"]
        text = partial.get_data(as_text=True)
        assert "<html" not in text and 'hx-swap-oob="true"' in text
        seen += sequences(text)
        url = more_url(text)
    assert seen == everything

    # Without htmx the same URL is a page of its own, with a link to the next one.
    full = client.get("/ns/default/runs/long-1/history?after_sequence=50")
    text = full.get_data(as_text=True)
    assert full.status_code == 200 and "<html" in text and " style=" not in text
    assert sequences(text) == everything[50:100]
    assert "/ns/default/runs/long-1/history?after_sequence=100" in text
    assert client.get("/ns/default/runs/long-1/history?after_sequence=x").status_code == 400


def test_history_of_a_missing_run_is_not_found(client, accounts):
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    assert client.get("/ns/default/runs/nope/history").status_code == 404


def test_every_history_refuses_a_bad_after_sequence_alike(client, accounts, api_for):
    """A schedule's and a run's history, in the API and the console: one rule, one answer
    (400 INVALID_CURSOR naming query.after_sequence, as docs/api.md says)."""
    api = api_for("dora", "admin")
    assert api.post("/workflows", json=LONG).status_code == 201
    assert api.post("/activations", json={"workflow": "long"}).status_code == 201
    assert api.post("/runs", json={"workflow": "long", "run_id": "r"}).status_code == 201
    saved = api.post("/schedules", json={"id": "s", "cron": "0 * * * *", "workflow": "long"})
    assert saved.status_code == 201
    sign_in(client, "dora", "pw-dora-secret")
    for bad in ("-5", "abc", "1.5", "²"):
        for path in ("/schedules/s/history", "/runs/r/history"):
            refused = api.get(f"{path}?after_sequence={bad}")
            assert refused.status_code == 400, (path, bad)
            error = refused.get_json()["error"]
            assert error["code"] == "INVALID_CURSOR", (path, bad)
            assert error["details"]["errors"][0]["loc"] == ["query", "after_sequence"]
            page = client.get(f"/ns/default{path}?after_sequence={bad}")
            assert page.status_code == 400, (path, bad)
            assert "after_sequence must be a non-negative integer" in page.get_data(as_text=True)
