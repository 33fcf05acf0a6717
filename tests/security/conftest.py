"""Helpers for the hardening tests: console sign-in, deploying workflows through the API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.conftest import Api

NOOP_STEPS = [{"id": "a", "type": "action", "action": "noop"}]


def csrf_from(response: Any) -> str:
    match = re.search(rb'name="csrf_token" value="([^"]+)"', response.data)
    assert match, response.data[:500]
    return match.group(1).decode()


def sign_in(client: FlaskClient, username: str, password: str, next_url: str = "") -> Any:
    token = csrf_from(client.get("/login"))
    data = {"username": username, "password": password, "csrf_token": token, "next": next_url}
    return client.post("/login", data=data)


def deploy(api: Api, name: str = "wf", input_schema: Any = None, steps: Any = None) -> Any:
    """Deploy and activate a workflow through the API; returns the deploy response."""
    body: dict[str, Any] = {"name": name, "steps": steps or NOOP_STEPS}
    if input_schema is not None:
        body["input_schema"] = input_schema
    response = api.post("/workflows", json=body)
    if response.status_code == 201:
        activated = api.post("/activations", json={"workflow": name})
        assert activated.status_code == 201, activated.get_json()
    return response


def error_of(response: Any) -> dict[str, Any]:
    body = response.get_json()
    assert body is not None and set(body) == {"error"}, response.data[:300]
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]  # type: ignore[no-any-return]


@pytest.fixture
def deployer(api_for: Any) -> Api:
    return api_for("dora", "deployer")  # type: ignore[no-any-return]
