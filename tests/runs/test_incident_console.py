"""The console's run page offers a way out of a suspended run: Retry, Skip or Fail its incident."""

from __future__ import annotations

from app.ticker.tick import run_tick
from tests.console.test_pages import csrf_from, sign_in


def _suspended(api_for, app) -> tuple:
    api = api_for("dora", "admin")
    definition = {
        "name": "stuck",
        "on_step_failure": "incident",
        "steps": [
            {"id": "charge", "type": "action", "action": "fail", "args": {"message": "declined"}},
            {"id": "after", "type": "action", "action": "echo", "args": "after"},
        ],
    }
    assert api.post("/workflows", json=definition).status_code == 201
    assert api.post("/activations", json={"workflow": "stuck"}).status_code == 201
    assert api.post("/runs", json={"workflow": "stuck", "run_id": "stuck-1"}).status_code == 201
    run_tick(app, work=True)
    assert api.get("/runs/stuck-1").get_json()["status"] == "suspended"
    return api, api.get("/runs/stuck-1/incidents").get_json()["items"][0]


def test_a_suspended_run_shows_its_incident_and_skip_resolves_it(app, client, accounts, api_for):
    api, incident = _suspended(api_for, app)
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    page = client.get("/ns/default/runs/stuck-1")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Open incidents" in html and "declined" in html
    for label in ("Retry</button>", "Skip</button>", "Fail</button>"):
        assert label in html
    assert "data-confirm=" in html and "<script>" not in html and " style=" not in html
    action = f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve"
    refused = client.post(action, data={"action": "skip"}, follow_redirects=False)
    assert refused.status_code == 400  # no CSRF token
    # Output that is not JSON: refused with the reason, and the text comes back to be fixed,
    # on the incidents page too (the form says to go back there).
    for back in ("", "/ns/default/incidents"):
        typo = client.post(
            action,
            data={"csrf_token": csrf_from(page), "action": "skip", "output": '{"charged": tru'}
            | ({"back": back} if back else {}),
            follow_redirects=True,
        )
        html = typo.get_data(as_text=True)
        assert "output is not valid JSON" in html, html[:3000]
        assert "{&#34;charged&#34;: tru</textarea>" in html, back
        assert api.get("/runs/stuck-1").get_json()["status"] == "suspended"
    done = client.post(
        action,
        data={"csrf_token": csrf_from(page), "action": "skip", "output": '{"charged": false}'},
        follow_redirects=True,
    )
    assert "Incident resolved (skip)" in done.get_data(as_text=True)
    run_tick(app, work=True)
    run = api.get("/runs/stuck-1").get_json()
    assert run["status"] == "completed" and run["output"] == "after"
    assert "Open incidents" not in client.get("/ns/default/runs/stuck-1").get_data(as_text=True)


def test_a_viewer_sees_the_incident_but_no_buttons_and_cannot_post(app, client, accounts, api_for):
    _api, incident = _suspended(api_for, app)
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    page = client.get("/ns/default/runs/stuck-1")
    html = page.get_data(as_text=True)
    assert "Open incidents" in html and "Retry</button>" not in html
    denied = client.post(
        f"/ns/default/runs/stuck-1/incidents/{incident['id']}/resolve",
        data={"csrf_token": csrf_from(page), "action": "fail"},
    )
    assert denied.status_code == 403
