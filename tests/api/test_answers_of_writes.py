"""A write's answer is read in the transaction that made it: a user disabled while the request
runs gets the answer of what was done, never a 500 for a write that happened.

PostgreSQL only: each transaction there is bound to the user's namespaces by row security, so one
begun after the commit would see nothing of a user disabled meanwhile. SQLite has no row security
and one writer at a time (the disable would wait for the request's commit).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.api import runs as runs_api
from app.api import workflows as workflows_api
from app.auth import service as auth_service
from app.context import database
from tests.conftest import FIXED_NOW

pytestmark = pytest.mark.parametrize("backend", ["postgres"])

FLOW = {"name": "greet", "steps": [{"id": "hello", "type": "action", "action": "echo"}]}


def _disabled_midway(
    app: Any, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, username: str
) -> None:
    """`module.name` disables `username` (in its own transaction) once it has done its work."""
    original = getattr(module, name)

    def then_disable(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        with database(app).session() as session:
            auth_service.disable_user(session, FIXED_NOW, username)
            session.commit()
        return result

    monkeypatch.setattr(module, name, then_disable)


def test_a_run_started_by_a_user_disabled_meanwhile_is_answered(
    app, admin_api, api_for, monkeypatch
):
    admin_api.post("/workflows", json=FLOW)
    admin_api.post("/activations", json={"workflow": "greet"})
    carol = api_for("carol", "operator")
    _disabled_midway(app, monkeypatch, runs_api.service, "start", "carol")
    started = carol.post("/runs", json={"workflow": "greet", "run_id": "r1"})
    assert started.status_code == 201, started.get_json()
    body = started.get_json()
    assert body["run_id"] == "r1" and body["workflow"] == "greet" and body["version"] == 1
    assert admin_api.get("/runs/r1").get_json()["status"] == body["status"]
    # From now on the user is refused, before anything is written.
    assert carol.post("/runs", json={"workflow": "greet", "run_id": "r2"}).status_code == 401
    assert admin_api.get("/runs/r2").status_code == 404


def test_a_deploy_and_a_retire_by_a_user_disabled_meanwhile_are_answered(
    app, admin_api, api_for, monkeypatch
):
    carol = api_for("carol", "admin")
    dave = api_for("dave", "admin")
    with monkeypatch.context() as patch:
        _disabled_midway(app, patch, workflows_api.workflows, "deploy", "carol")
        deployed = carol.post("/workflows", json=FLOW)
    assert deployed.status_code == 201, deployed.get_json()
    assert deployed.get_json()["name"] == "greet" and deployed.get_json()["version"] == 1
    activation = admin_api.post("/activations", json={"workflow": "greet"}).get_json()
    _disabled_midway(app, monkeypatch, workflows_api.workflows, "retire", "dave")
    retired = dave.post(f"/activations/{activation['id']}/retire")
    assert retired.status_code == 200, retired.get_json()
    assert retired.get_json()["status"] == "retired"
    assert retired.get_json()["workflow"] == "greet"
