"""The workflows page: versions and activations; deploy with inline errors naming the step, then
success; activate and retire for deployers only (both databases)."""

from __future__ import annotations

import html as html_module
import json
import re

from tests.console.test_pages import csrf_from, sign_in

GOOD = {
    "name": "nightly-report",
    "input_schema": {"type": "object"},
    "steps": [
        {"id": "build", "type": "action", "action": "echo"},
        {"id": "cool-down", "type": "wait", "duration": "PT5M"},
    ],
}


def deploy(client, definition: str, activate: bool = True):
    token = csrf_from(client.get("/ns/default/workflows"))
    form = {"definition": definition, "csrf_token": token}
    if activate:
        form["activate"] = "1"
    return client.post("/ns/default/workflows", data=form)


def test_empty_state_teaches_both_ways(client, accounts):
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    html = client.get("/ns/default/workflows").get_data(as_text=True)
    assert "No workflow yet" in html and "almanac workflows deploy FILE" in html
    assert 'id="deploy"' in html and "An example definition" in html


def test_deploy_error_is_inline_naming_the_step_then_succeeds(client, accounts, admin_api):
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    bad = json.loads(json.dumps(GOOD))
    bad["steps"][1]["duration"] = "five minutes"
    refused = deploy(client, json.dumps(bad))
    assert refused.status_code == 422
    html = refused.get_data(as_text=True)
    assert "Step “cool-down”" in html and "steps.1.duration" in html
    assert 'aria-invalid="true"' in html
    # The definition is kept as typed, and nothing was written.
    assert "five minutes" in html
    assert admin_api.get("/workflows").get_json()["items"] == []
    api_error = admin_api.post("/workflows", json=bad).get_json()["error"]
    assert api_error["details"]["step"] == "cool-down"
    assert api_error["details"]["errors"][0]["msg"] in html_module.unescape(html)

    # Every mistake is named, not only the first.
    bad["steps"][0]["action"] = "no-such-action"
    both = deploy(client, json.dumps(bad)).get_data(as_text=True)
    assert "steps.0.action" in both and "steps.1.duration" in both

    empty = deploy(client, "  \n")
    assert empty.status_code == 422
    assert "Nothing to deploy: type or paste a definition" in empty.get_data(as_text=True)

    broken = deploy(client, '{"name": "x",')
    assert broken.status_code == 422
    assert "That is not valid JSON" in broken.get_data(as_text=True)

    done = deploy(client, json.dumps(GOOD))
    assert done.status_code == 302
    page = client.get(done.headers["Location"]).get_data(as_text=True)
    assert "Deployed nightly-report version 1 and activated it." in page
    activations = admin_api.get("/activations").get_json()["items"]
    assert [(a["workflow"], a["version"], a["status"]) for a in activations] == [
        ("nightly-report", 1, "ready")
    ]
    assert activations[0]["id"] in page and "version 1 · 2 steps" in page


def test_activate_and_retire(client, accounts, admin_api):
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    deploy(client, json.dumps(GOOD), activate=False)
    deploy(client, json.dumps(GOOD | {"description": "second"}), activate=False)
    html = client.get("/ns/default/workflows").get_data(as_text=True)
    assert "not runnable" in html and "v2" in html
    token = csrf_from(client.get("/ns/default/workflows"))
    done = client.post(
        "/ns/default/workflows/nightly-report/activate", data={"version": "1", "csrf_token": token}
    )
    assert done.status_code == 302
    (activation,) = admin_api.get("/activations").get_json()["items"]
    assert activation["version"] == 1 and activation["status"] == "ready"
    retired = client.post(
        f"/ns/default/activations/{activation['id']}/retire", data={"csrf_token": token}
    )
    assert retired.status_code == 302
    assert admin_api.get("/activations").get_json()["items"][0]["status"] == "retired"
    page = client.get("/ns/default/workflows").get_data(as_text=True)
    assert f"Retired activation {activation['id']}." in page
    # Unknown activation: back to the page with the reason, nothing else changes.
    missing = client.post("/ns/default/activations/nope/retire", data={"csrf_token": token})
    assert missing.status_code == 302
    assert "does not exist" in client.get("/ns/default/workflows").get_data(as_text=True)


def test_others_see_no_controls_and_are_refused(client, accounts, admin_api):
    admin_api.post("/workflows", json=GOOD)
    activation = admin_api.post("/activations", json={"workflow": "nightly-report"}).get_json()
    accounts.create("olga", role="operator")
    sign_in(client, "olga", "pw-olga-secret")
    html = client.get("/ns/default/workflows").get_data(as_text=True)
    assert "nightly-report" in html and activation["id"] in html
    assert "Deploy a definition" not in html and "Retire" not in html
    assert not re.search(r">Activate v\d", html)
    token = csrf_from(client.get("/ns/default/workflows"))
    assert deploy(client, json.dumps(GOOD)).status_code == 403
    retire = client.post(
        f"/ns/default/activations/{activation['id']}/retire", data={"csrf_token": token}
    )
    assert retire.status_code == 403
    assert admin_api.get("/activations").get_json()["items"][0]["status"] == "ready"


def test_posts_need_csrf(client, accounts, admin_api):
    admin_api.post("/workflows", json=GOOD)
    activation = admin_api.post("/activations", json={"workflow": "nightly-report"}).get_json()
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    posts = {
        "/ns/default/workflows": {"definition": json.dumps(GOOD | {"description": "v2"})},
        "/ns/default/workflows/nightly-report/activate": {"version": "1"},
        f"/ns/default/activations/{activation['id']}/retire": {},
        "/preferences/times": {"show": "zone", "next": "/"},
    }
    for path, form in posts.items():
        response = client.post(path, data=form)
        assert response.status_code == 400, path
        assert (
            "Set-Cookie" not in response.headers
            or "almanac_times" not in response.headers["Set-Cookie"]
        )
    items = admin_api.get("/activations").get_json()["items"]
    assert [(a["version"], a["status"]) for a in items] == [(1, "ready")]
    assert admin_api.get("/workflows/nightly-report").get_json()["version"] == 1


def _deploy_after_sign_out(client, definition: str, activate: bool):
    """Dora's deploy, posted after her session ended in another tab; she signs in again."""
    page = client.get("/ns/default/workflows")
    token = csrf_from(page)
    typed_by = re.search(r'name="typed_by" value="([^"]+)"', page.get_data(as_text=True))[1]
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    form = {"definition": definition, "csrf_token": token, "typed_by": typed_by}
    if activate:
        form["activate"] = "1"
    refused = client.post("/ns/default/workflows", data=form)
    assert refused.status_code == 302 and refused.headers["Location"].startswith("/login")
    login = client.get(refused.headers["Location"])
    assert "what you submitted was NOT saved" in html_module.unescape(login.get_data(as_text=True))
    signed_in = client.post(
        "/login",
        data={
            "username": "dora",
            "password": "pw-dora-secret",
            "csrf_token": csrf_from(login),
            "next": "/ns/default/workflows",
        },
    )
    assert signed_in.headers["Location"] == "/ns/default/workflows"
    return html_module.unescape(client.get("/ns/default/workflows").get_data(as_text=True))


def _checked(page: str) -> bool:
    box = re.search(r'<input type="checkbox" name="activate"[^>]*>', page)
    assert box, page
    return "checked" in box[0]


def test_a_deploy_after_the_session_ended_comes_back_as_typed(client, accounts, admin_api):
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    typed = json.dumps(GOOD | {"description": "typed before the session ended"})
    back = _deploy_after_sign_out(client, typed, activate=False)
    assert "this definition was not deployed" in re.sub(r"</?strong>", "", back)
    assert "typed before the session ended" in back
    assert not _checked(back)  # as it was posted
    # The page opens at the definition (focused, so scrolled into view), not at its top.
    assert re.search(r'<textarea id="definition"[^>]*\sautofocus', back), back
    assert admin_api.get("/workflows").get_json()["items"] == []
    # Once: the next visit shows an empty form again, its box checked as by default.
    again = client.get("/ns/default/workflows").get_data(as_text=True)
    assert "typed before the session ended" not in again and "not deployed" not in again
    assert not re.search(r'<textarea id="definition"[^>]*\sautofocus', again)
    assert _checked(again)
    # Deployed as it came back.
    assert deploy(client, typed, activate=False).status_code == 302
    assert [w["name"] for w in admin_api.get("/workflows").get_json()["items"]] == [
        "nightly-report"
    ]


def test_a_kept_deploy_with_activate_checked_comes_back_checked(client, accounts):
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    back = _deploy_after_sign_out(client, json.dumps(GOOD), activate=True)
    assert "not deployed" in re.sub(r"</?strong>", "", back) and _checked(back)


def test_a_refused_deploy_keeps_the_activate_box_as_posted(client, accounts):
    # It came back checked whatever was posted, so the fixed definition was activated.
    accounts.create("dora", role="deployer")
    sign_in(client, "dora", "pw-dora-secret")
    unchecked = deploy(client, '{"name": "x",', activate=False)
    assert unchecked.status_code == 422 and not _checked(unchecked.get_data(as_text=True))
    checked = deploy(client, '{"name": "x",', activate=True)
    assert checked.status_code == 422 and _checked(checked.get_data(as_text=True))
