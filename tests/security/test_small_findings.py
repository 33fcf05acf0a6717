"""Files 0600 from creation, declared audit sources, namespaces probed as 404 (finding 7)."""

from __future__ import annotations

import os
import stat

from app.db import Base, make_engine
from app.settings import encryption_keys, instance_secret
from tests.conftest import make_test_app
from tests.security.conftest import deploy, error_of


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_secret_key_encryption_key_and_sqlite_files_are_0600_under_a_loose_umask(tmp_path):
    old = os.umask(0o022)
    try:
        db = tmp_path / "almanac.db"
        app = make_test_app(f"sqlite:///{db}", SECRET_KEY=None, ENCRYPTION_KEYS=None)
        app.instance_path = str(tmp_path)
        instance_secret(app)
        encryption_keys(app)
        engine = make_engine(f"sqlite:///{db}")
        Base.metadata.create_all(engine)
        engine.dispose()
        app.extensions["almanac.db"].dispose()
    finally:
        os.umask(old)
    for name in ("secret_key", "encryption_key", "almanac.db", "almanac.db-wal", "almanac.db-shm"):
        path = tmp_path / name
        if name.endswith(("-wal", "-shm")) and not path.exists():
            continue
        assert _mode(path) == 0o600, (name, oct(_mode(path)))


def test_only_cli_and_sdk_are_recorded_as_declared(admin_api):
    deploy(admin_api)
    for index, (header, recorded) in enumerate(
        [
            ("cli", "cli"),
            ("sdk", "sdk"),
            ("scheduler", "api"),
            ("console", "api"),
            ("x" * 500, "api"),
        ]
    ):
        body = {"id": f"s{index}", "cron": "* * * * *", "action": {"workflow": "wf"}}
        response = admin_api.post("/schedules", json=body, headers={"X-Almanac-Source": header})
        assert response.status_code == 201
        events = admin_api.get(f"/schedules/s{index}/history").get_json()["events"]
        assert events[0]["payload"]["command_context"]["source"] == recorded, header


def test_a_namespace_without_a_role_is_404_exactly_like_a_missing_one(api_for, accounts):
    accounts.create("owner", role="admin", namespace="secret-team")
    outsider = api_for("outsider", role="viewer")
    hidden = outsider.get("/namespaces/secret-team/schedules")
    missing = outsider.get("/namespaces/no-such-team/schedules")
    assert hidden.status_code == missing.status_code == 404
    assert error_of(hidden)["code"] == error_of(missing)["code"] == "NOT_FOUND"
    assert error_of(hidden)["message"].replace("secret-team", "N") == error_of(missing)[
        "message"
    ].replace("no-such-team", "N")
    header = outsider.get("/schedules", headers={"X-Namespace": "secret-team"})
    assert header.status_code == 404
    viewer_without_grant = outsider.post("/runs", json={"workflow": "wf"})
    assert viewer_without_grant.status_code == 403
    assert error_of(viewer_without_grant)["details"]["grant"] == "run.start"
