"""Two first deploys of one workflow name at once: each gets its own version, neither a 500."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select

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
