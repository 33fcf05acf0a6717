"""`GET /me` for `almanac auth status`, and the audit source a client declares."""

from __future__ import annotations

import pytest

from tests.conftest import Api


def test_me_names_the_token_owner_and_their_namespaces_with_roles(client, accounts):
    account = accounts.create("mira", role="viewer", namespace="billing")
    accounts.create("other", role="operator", namespace="ops")
    body = Api(client, account.token).get("/me").get_json()
    assert body == {
        "username": "mira",
        "superuser": False,
        "namespaces": [{"name": "billing", "role": "viewer"}],
    }


def test_me_for_a_superuser_lists_every_namespace(client, accounts):
    root = accounts.create("root", role="operator", superuser=True)
    accounts.create("other", role="viewer", namespace="ops")
    body = Api(client, root.token).get("/me").get_json()
    assert body["superuser"] is True
    assert body["namespaces"] == [
        {"name": "default", "role": "operator"},
        {"name": "ops", "role": "admin"},
    ]


def test_me_without_a_token_is_unauthenticated(client):
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    ("declared", "recorded"),
    [("cli", "cli"), ("sdk", "sdk"), ("console", "api"), ("scheduler", "api"), (None, "api")],
)
def test_the_audit_source_is_what_the_client_declares_or_api(client, accounts, declared, recorded):
    api = Api(client, accounts.create("dev", role="deployer").token)
    flow = {
        "name": "w",
        "input_schema": {"type": "object"},
        "steps": [{"id": "a", "type": "action", "action": "noop"}],
    }
    assert api.post("/workflows", json=flow).status_code == 201
    assert api.post("/activations", json={"workflow": "w"}).status_code == 201
    headers = {"X-Almanac-Source": declared} if declared else {}
    body = {"id": "s", "cron": "0 * * * *", "action": {"workflow": "w"}}
    assert api.post("/schedules", json=body, headers=headers).status_code == 201
    events = api.get("/schedules/s/history").get_json()["events"]
    assert events[0]["payload"]["command_context"]["source"] == recorded
