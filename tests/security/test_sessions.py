"""Console sessions live server-side: ended by logout, password change, disable and revoke;
8 h absolute, 1 h idle; rotated at login; no password hash in the cookie (finding 5)."""

from __future__ import annotations

import base64
import json
import zlib
from datetime import timedelta

from app.context import clock, database
from tests.conftest import FIXED_NOW
from tests.security.conftest import csrf_from, sign_in


def _cookie(client) -> str:
    cookie = client.get_cookie("session")
    assert cookie is not None
    return cookie.value


def _replay(app, cookie: str):
    other = app.test_client()
    other.set_cookie("session", cookie)
    return other.get("/ns/default/schedules")


def _set_now(app, when):
    with database(app).session() as session:
        clock(app).set(session, when)
        session.commit()


def _decode(cookie: str) -> dict:
    payload = cookie.split(".")[1] if cookie.startswith(".") else cookie.split(".")[0]
    data = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    if cookie.startswith("."):
        data = zlib.decompress(data)
    return json.loads(data)


def test_cookie_replayed_after_logout_is_refused(app, client, accounts):
    account = accounts.create("alice")
    sign_in(client, "alice", account.password)
    captured = _cookie(client)
    assert _replay(app, captured).status_code == 200
    page = client.get("/ns/default/schedules")
    assert client.post("/logout", data={"csrf_token": csrf_from(page)}).status_code == 302
    replayed = _replay(app, captured)
    assert replayed.status_code == 302 and "/login" in replayed.headers["Location"]


def test_session_id_rotates_at_login_and_cookie_holds_no_password_hash(app, client, accounts):
    account = accounts.create("alice")
    sign_in(client, "alice", account.password)
    first = _decode(_cookie(client))["_user_id"]
    before = _cookie(client)
    sign_in(client, "alice", account.password)
    second = _decode(_cookie(client))["_user_id"]
    assert first != second
    # The replaced session id no longer signs anyone in.
    assert _replay(app, before).status_code == 302
    with database(app).session() as session:
        from app.auth.service import get_user

        password_hash = get_user(session, "alice").password_hash
    for fragment in (password_hash[-12:], password_hash[-8:]):
        assert fragment not in json.dumps(_decode(_cookie(client)))


def test_password_change_disable_and_revoke_end_sessions_at_once(app, client, accounts, runner):
    for username, command in (
        ("alice", ["users", "set-password", "alice", "--password", "a-new-password"]),
        ("bob", ["users", "disable", "bob"]),
        ("carol", ["users", "revoke-sessions", "carol"]),
    ):
        account = accounts.create(username)
        browser = app.test_client()
        sign_in(browser, username, account.password)
        assert browser.get("/ns/default/schedules").status_code == 200
        result = runner.invoke(args=command)
        assert result.exit_code == 0, result.output
        response = browser.get("/ns/default/schedules")
        assert response.status_code == 302 and "/login" in response.headers["Location"], username
    assert "ended 1 console session(s) of carol" in result.output


def test_idle_hour_and_absolute_eight_hours(app, accounts):
    account = accounts.create("alice")
    idle = app.test_client()
    sign_in(idle, "alice", account.password)
    busy = app.test_client()
    sign_in(busy, "alice", account.password)
    # Active every 50 minutes: never idle, but activity does not extend the 8 hours.
    statuses = []
    for step in range(1, 11):
        _set_now(app, FIXED_NOW + timedelta(minutes=50 * step))
        statuses.append(busy.get("/ns/default/schedules").status_code)
        if step == 1:
            assert idle.get("/ns/default/schedules").status_code == 200
        if step == 3:  # idle for 100 minutes since its last request
            assert idle.get("/ns/default/schedules").status_code == 302
    assert statuses == [200] * 9 + [302]
    fresh = app.test_client()
    _set_now(app, FIXED_NOW + timedelta(hours=9))
    sign_in(fresh, "alice", account.password)
    _set_now(app, FIXED_NOW + timedelta(hours=10, minutes=1))
    assert fresh.get("/ns/default/schedules").status_code == 302
