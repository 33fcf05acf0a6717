"""Login throttling in the database: 5 failures per username or 30 per address in 15 minutes
(finding 5)."""

from __future__ import annotations

from datetime import timedelta

from werkzeug.security import check_password_hash

from app.auth import service as auth_service
from app.context import clock, database
from tests.conftest import FIXED_NOW
from tests.security.conftest import csrf_from


def _attempt(client, username: str, password: str, address: str = "10.0.0.1"):
    token = csrf_from(client.get("/login"))
    return client.post(
        "/login",
        data={"username": username, "password": password, "csrf_token": token},
        environ_base={"REMOTE_ADDR": address},
    )


def _set_now(app, when):
    with database(app).session() as session:
        clock(app).set(session, when)
        session.commit()


def test_five_failures_lock_the_username_before_hashing_until_the_window_passes(
    app, client, accounts, monkeypatch
):
    account = accounts.create("alice")
    for _ in range(5):
        assert _attempt(client, "alice", "wrong-password").status_code == 401
    hashed: list[str] = []
    monkeypatch.setattr(
        auth_service,
        "check_password_hash",
        lambda stored, given: hashed.append(given) or check_password_hash(stored, given),
    )
    refused = _attempt(client, "alice", account.password)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 15 * 60
    assert "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert hashed == []  # refused before any hash was computed
    # Another process sees the same count: a second app on the same database refuses too.
    from tests.conftest import make_test_app

    twin = make_test_app(app.config["DATABASE_URL"])
    assert _attempt(twin.test_client(), "alice", account.password).status_code == 429
    _set_now(app, FIXED_NOW + timedelta(minutes=15, seconds=1))
    assert _attempt(client, "alice", account.password).status_code == 302


def test_success_clears_the_username_count(app, client, accounts):
    account = accounts.create("alice")
    for _ in range(4):
        _attempt(client, "alice", "wrong-password")
    assert _attempt(client, "alice", account.password).status_code == 302
    fresh = app.test_client()
    for _ in range(4):
        assert _attempt(fresh, "alice", "wrong-password").status_code == 401
    assert _attempt(fresh, "alice", account.password).status_code == 302


def test_thirty_failures_from_one_address_lock_it(app, client, accounts):
    account = accounts.create("alice")
    for index in range(30):
        assert _attempt(client, f"nobody{index}", "wrong", "10.9.9.9").status_code == 401
    assert _attempt(client, "alice", account.password, "10.9.9.9").status_code == 429
    assert _attempt(client, "alice", account.password, "10.1.1.1").status_code == 302
