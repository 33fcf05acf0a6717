"""Console sign-in, CSRF, the namespace switcher and htmx partials (Flask test client)."""

from __future__ import annotations

import re


def csrf_from(response) -> str:
    match = re.search(rb'name="csrf_token" value="([^"]+)"', response.data)
    assert match, response.data[:500]
    return match.group(1).decode()


def sign_in(client, username: str, password: str):
    token = csrf_from(client.get("/login"))
    return client.post(
        "/login", data={"username": username, "password": password, "csrf_token": token}
    )


def test_login_page_renders(client):
    response = client.get("/login")
    assert response.status_code == 200
    assert b"Sign in to Almanac" in response.data
    assert b"vendor/htmx-2.0.11/htmx.min.js" in response.data


def test_pages_need_sign_in(client):
    response = client.get("/ns/default/schedules")
    assert response.status_code == 302
    assert "/login" in response.headers["Location"]


def test_failures_do_not_reveal_whether_the_user_exists(client, accounts):
    accounts.create("alice")
    wrong_password = sign_in(client, "alice", "nope-nope-nope")
    no_such_user = sign_in(client, "mallory", "nope-nope-nope")
    assert wrong_password.status_code == no_such_user.status_code == 401
    # Compare the page body: CSRF tokens (in the head and the form) differ from request to request.
    strip = lambda r: re.sub(rb'value="[^"]+"', b"", r.data.split(b"<main", 1)[1])  # noqa: E731
    assert strip(wrong_password) == strip(no_such_user)
    assert b"Wrong username or password." in wrong_password.data


def test_login_without_csrf_token_is_refused(client, accounts):
    accounts.create("alice")
    response = client.post("/login", data={"username": "alice", "password": "pw-alice-secret"})
    assert response.status_code == 400
    assert client.get("/ns/default/schedules").status_code == 302


def test_sign_in_lands_on_schedules_with_switcher_of_memberships(client, accounts):
    accounts.create("alice", namespace="billing")
    accounts.create("bob", namespace="reports")
    accounts.create("alice2", namespace="default")
    response = sign_in(client, "alice", "pw-alice-secret")
    assert response.status_code == 302
    page = client.get(response.headers["Location"], follow_redirects=True)
    assert page.status_code == 200
    assert b"Schedules" in page.data and b"billing" in page.data
    assert b'value="reports"' not in page.data
    cookie = response.headers.get("Set-Cookie", "")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_foreign_namespace_is_404_like_a_missing_one_and_switch_404(client, accounts):
    accounts.create("alice", namespace="billing")
    accounts.create("bob", namespace="reports")
    sign_in(client, "alice", "pw-alice-secret")
    assert client.get("/ns/reports/schedules").status_code == 404
    assert client.get("/ns/no-such-namespace/schedules").status_code == 404
    assert client.get("/switch?ns=reports").status_code == 404
    assert client.get("/switch?ns=billing").status_code == 302


def test_partial_with_hx_request_and_page_without(client, accounts):
    accounts.create("alice")
    sign_in(client, "alice", "pw-alice-secret")
    full = client.get("/ns/default/schedules")
    partial = client.get("/ns/default/schedules", headers={"HX-Request": "true"})
    boosted = client.get(
        "/ns/default/schedules", headers={"HX-Request": "true", "HX-Boosted": "true"}
    )
    assert b"<html" in full.data and b"<html" not in partial.data and b"<html" in boosted.data
    assert b"No schedules yet." in partial.data  # an empty namespace teaches the first step
    for response in (full, partial):
        assert "HX-Request" in response.headers["Vary"]


def test_logout_needs_post_with_csrf(client, accounts):
    accounts.create("alice")
    page = client.get(
        sign_in(client, "alice", "pw-alice-secret").headers["Location"], follow_redirects=True
    )
    assert client.post("/logout").status_code == 400
    response = client.post("/logout", data={"csrf_token": csrf_from(page)})
    assert response.status_code == 302
    assert client.get("/ns/default/schedules").status_code == 302


def test_disabled_user_is_signed_out(app, client, accounts):
    from app.auth import service
    from app.context import database
    from tests.conftest import FIXED_NOW

    accounts.create("alice")
    sign_in(client, "alice", "pw-alice-secret")
    assert client.get("/ns/default/schedules").status_code == 200
    with database(app).session() as session:
        service.disable_user(session, FIXED_NOW, "alice")
        session.commit()
    assert client.get("/ns/default/schedules").status_code == 302


def test_a_wrong_password_keeps_the_username_but_never_the_password(client, accounts):
    # The username field came back empty, so a mistyped password meant typing both again.
    accounts.create("alice")
    refused = sign_in(client, "alice", "nope-nope-nope")
    assert refused.status_code == 401
    form = refused.get_data(as_text=True)
    assert re.search(r'<input id="username" name="username"[^>]* value="alice"', form)
    assert "nope-nope-nope" not in form
    assert re.search(r'<input id="password"[^>]* autofocus', form)
    # Escaped like any text: a username cannot plant markup in the form.
    odd = sign_in(client, '"><b>x', "nope-nope-nope").get_data(as_text=True)
    assert 'value="&#34;&gt;&lt;b&gt;x"' in odd and "<b>x" not in odd


def test_console_answers_are_never_cached_but_static_assets_are(client, accounts):
    # A signed-in page had no Cache-Control: after sign-out, Back (or a shared cache) showed it.
    login = client.get("/login")
    assert login.headers["Cache-Control"] == "no-store"
    assert sign_in(client, "alice", "wrong-password").headers["Cache-Control"] == "no-store"
    accounts.create("alice")
    signed_in = sign_in(client, "alice", "pw-alice-secret")
    assert signed_in.headers["Cache-Control"] == "no-store"
    for path in ("/ns/default/schedules", "/ns/default/", "/ns/default/runs", "/no-such-page"):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(path, headers=headers)
            assert response.headers.get("Cache-Control") == "no-store", (path, headers)
    for path in ("/static/app.js", "/static/app.css", "/favicon.ico"):
        assert "no-store" not in client.get(path).headers.get("Cache-Control", ""), path
