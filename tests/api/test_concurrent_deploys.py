"""Two creates of one name at once (a workflow's first deploy, a namespace): each gets the answer
it would get one after the other, never a 500."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select

from app.auth import service as auth_service
from app.context import database
from app.db import Namespace
from app.db.rls import Scope
from app.runs import workflows
from tests.conftest import FIXED_NOW, Api

FLOW = {"name": "fresh", "steps": [{"id": "a", "type": "action", "action": "echo"}]}


def test_a_first_deploy_waiting_on_another_first_deploy_of_the_name_becomes_version_2(
    app, admin_api
):
    with database(app).bound(Scope.all()).session() as other:
        namespace = other.scalar(select(Namespace).where(Namespace.name == "default"))
        assert namespace is not None
        # Another deploy of the new name has inserted the workflow and not committed yet.
        assert workflows.deploy(other, FIXED_NOW, namespace, dict(FLOW)).version == 1
        box: dict[str, Any] = {}
        second = Api(app.test_client(), admin_api.token)
        thread = threading.Thread(
            target=lambda: box.setdefault("r", second.post("/workflows", json=FLOW))
        )
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # it waits for the first deploy's row
        other.commit()
    thread.join()
    response = box["r"]
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["version"] == 2
    versions = admin_api.get("/workflows/fresh").get_json()["versions"]
    assert sorted(v["version"] for v in versions) == [1, 2]


def test_a_namespace_created_while_another_create_of_its_name_waits_to_commit_is_409(
    app, admin_api
):
    with database(app).bound(Scope.all()).session() as other:
        auth_service.create_namespace(other, FIXED_NOW, "twice")
        box: dict[str, Any] = {}
        second = Api(app.test_client(), admin_api.token)
        thread = threading.Thread(
            target=lambda: box.setdefault("r", second.post("/namespaces", json={"name": "twice"}))
        )
        thread.start()
        thread.join(timeout=1.0)
        if app.config["DATABASE_URL"].startswith("postgresql"):
            assert thread.is_alive()  # it waits for the other create's row
        other.commit()
    thread.join()
    response = box["r"]
    assert response.status_code == 409, response.get_json()
    assert response.get_json()["error"]["code"] == "CONFLICT"
    names = [n["name"] for n in admin_api.get("/namespaces").get_json()["items"]]
    assert names.count("twice") == 1
