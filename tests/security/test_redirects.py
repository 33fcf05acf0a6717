"""After sign-in the browser goes only to a local path (finding 3)."""

from __future__ import annotations

import pytest

from app.console.redirects import local_target
from tests.security.conftest import sign_in

HOSTILE = [
    "//evil.com",
    "/\t/evil.com",
    "/\n/evil.com",
    "/\\evil.com",
    "/\\/evil.com",
    "https://evil.com",
    "javascript:alert(1)",
    "evil.com",
    "/ns\r\nSet-Cookie: x=1",
    "/\x00x",
    "",
    # Browsers resolve dot segments first: each of these is the path `//evil…`.
    "/.//evil.example",
    "/./\\evil",
    "/a/../..//evil",
    "/%2e%2e//evil.example",
    "/x/.%2E//evil",
]


@pytest.mark.parametrize("target", HOSTILE)
def test_hostile_next_goes_home(target):
    assert local_target(target) == "/"


def test_local_paths_are_kept():
    assert (
        local_target("/ns/default/schedules?status=paused") == "/ns/default/schedules?status=paused"
    )


def test_dot_segments_and_repeated_slashes_are_resolved_keeping_the_query():
    assert local_target("/ns/default/./runs/../schedules") == "/ns/default/schedules"
    assert local_target("/ns//default/runs?q=a//b") == "/ns/default/runs?q=a//b"


def test_sign_in_with_a_dot_segment_next_goes_home(client, accounts):
    account = accounts.create("alice")
    for target in ("/.//evil.example", "/./\\evil", "/a/../..//evil"):
        client.post("/logout")
        response = sign_in(client, "alice", account.password, next_url=target)
        assert (response.status_code, response.headers["Location"]) == (302, "/"), target
    client.post("/logout")
    ok = sign_in(client, "alice", account.password, next_url="/schedules?status=paused")
    assert ok.headers["Location"] == "/schedules?status=paused"


def test_login_with_tab_slash_next_redirects_to_root(client, accounts):
    account = accounts.create("alice")
    page = client.get("/login?next=/%09/evil.com")
    assert page.status_code == 200 and "evil.com" not in page.get_data(as_text=True)
    for target in ("/\t/evil.com", "/\n/evil.com", "//evil.com", "/\\evil.com"):
        client.post("/logout")
        response = sign_in(client, "alice", account.password, next_url=target)
        assert response.status_code == 302, target
        assert response.headers["Location"] == "/", target
    client.post("/logout")
    ok = sign_in(client, "alice", account.password, next_url="/ns/default/runs")
    assert ok.headers["Location"] == "/ns/default/runs"
