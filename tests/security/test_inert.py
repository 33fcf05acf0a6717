"""Hostile text in every free-text field renders inert on console and API; viewers see no
mutating control."""

from __future__ import annotations

import re

from tests.security.conftest import sign_in

SCRIPT = "<script>alert(1)</script>"
JS_URL = "javascript:alert(1)"
CONTROL = "bell\x07esc\x1b[31mrtl\u202eend\r\nnext"
HOSTILE = f"{SCRIPT} {JS_URL} {CONTROL}"
TASK_STEPS = [
    {"id": "review", "type": "task", "title": SCRIPT, "role": "operator"},
    {"id": "approve", "type": "signal", "signal": "approve"},
]


def _seed(admin_api) -> None:
    body = {
        "name": "wf",
        "description": HOSTILE,
        "input_schema": {"type": "object"},
        "steps": TASK_STEPS,
    }
    assert admin_api.post("/workflows", json=body).status_code == 201
    assert admin_api.post("/activations", json={"workflow": "wf"}).status_code == 201
    schedule = {
        "id": "s",
        "cron": "*/5 * * * *",
        "action": {"workflow": "wf", "input": {"note": HOSTILE}},
        "notes": HOSTILE,
        "labels": {"team": f"{SCRIPT}{JS_URL}"},
        "memo": {"m": HOSTILE},
        "search_attributes": {"a": HOSTILE},
    }
    assert admin_api.post("/schedules", json=schedule).status_code == 201
    paused = admin_api.post(
        "/schedules/s/pause", json={"reason": HOSTILE}, headers={"If-Match": "1"}
    )
    assert paused.status_code == 200, paused.get_json()
    run = {"workflow": "wf", "run_id": "r1", "input": {"x": HOSTILE}, "labels": {"k": SCRIPT}}
    assert admin_api.post("/runs", json=run).status_code == 201
    admin_api.post("/admin/tick", json={"work": True})
    admin_api.post("/runs/r1/signals/approve", json={"payload": {"p": HOSTILE}})


def _assert_inert(html: str, where: str) -> None:
    assert SCRIPT not in html, where
    assert not re.search(
        r"""(href|src|action|formaction)\s*=\s*["']?\s*javascript:""", html, re.I
    ), where
    scripts = re.findall(r"<script[^>]*>", html)
    assert all("src=" in tag for tag in scripts), (where, scripts)


def test_hostile_text_is_inert_in_console_and_api(client, accounts, admin_api):
    _seed(admin_api)
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    pages = [
        "/ns/default/schedules",
        "/ns/default/schedules/s",
        "/ns/default/schedules/s/edit",
        "/ns/default/schedules/s/history",
        "/ns/default/runs",
        "/ns/default/runs/r1",
        "/ns/default/tasks",
    ]
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.get_data(as_text=True)
        _assert_inert(html, path)
        assert response.headers["Content-Type"].startswith("text/html")
    escaped = client.get("/ns/default/schedules/s").get_data(as_text=True)
    assert "&lt;script&gt;" in escaped
    for path in (
        "/schedules/s",
        "/schedules/s/history",
        "/runs/r1",
        "/runs/r1/history",
        "/workflows/wf",
        "/tasks",
    ):
        response = admin_api.get(path)
        assert response.status_code == 200 and response.is_json, path
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        body = response.get_data(as_text=True)
        assert "\x07" not in body and "\x1b" not in body, path  # JSON escapes control characters


def test_viewer_sees_no_mutating_control_on_any_page(client, accounts, admin_api):
    _seed(admin_api)
    viewer = accounts.create("vera", role="viewer")
    sign_in(client, "vera", viewer.password)
    for path in (
        "/ns/default/schedules",
        "/ns/default/schedules/s",
        "/ns/default/runs",
        "/ns/default/runs/r1",
        "/ns/default/tasks",
        "/ns/default/",
        "/ns/default/workflows",
    ):
        html = client.get(path).get_data(as_text=True)
        forms = re.findall(r'<form[^>]*method="post"[^>]*action="([^"]+)"', html)
        # Only the viewer's own session and display preference (a cookie) can be posted.
        assert sorted(forms) == ["/logout", "/preferences/times"], (path, forms)
        for label in (
            "New schedule",
            "Pause",
            "Trigger now",
            "Delete",
            "Cancel",
            "Terminate",
            "Complete",
        ):
            assert f">{label}<" not in html, (path, label)
