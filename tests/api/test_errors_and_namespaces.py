"""The JSON error body (docs/api.md), authentication, and the namespaces routes."""

from __future__ import annotations

import hashlib

from sqlalchemy import func, select

from app.context import database
from app.db import ApiToken, Namespace


def error_of(response):
    body = response.get_json()
    assert response.content_type.startswith("application/json"), response.data[:200]
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def namespace_count(app) -> int:
    with database(app).session() as session:
        return session.scalar(select(func.count()).select_from(Namespace))


def test_health_needs_no_token_and_reports_database_and_ticker(client):
    response = client.get("/api/v1/health")
    assert response.status_code == 200
    body = response.get_json()
    assert body["database"] == "ok"
    assert body["ticker"] == {"enabled": False, "last_tick_at": None, "lag_seconds": None}


def test_missing_and_unknown_tokens_are_401(client, admin):
    assert error_of(client.get("/api/v1/namespaces"))["code"] == "UNAUTHENTICATED"
    response = client.get("/api/v1/namespaces", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert error_of(response)["code"] == "UNAUTHENTICATED"
    # A 401 says how to authenticate (RFC 9110).
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="almanac"'


def test_tokens_are_stored_hashed_and_their_use_recorded(app, admin_api, admin):
    assert admin_api.get("/namespaces").status_code == 200
    with database(app).session() as session:
        row = session.scalar(select(ApiToken))
    assert row.token_sha256 == hashlib.sha256(admin.token.encode()).hexdigest()
    assert admin.token not in (row.token_sha256, row.name)
    assert row.last_used_at is not None


def test_namespaces_list_only_memberships(api_for, accounts):
    accounts.create("alice", role="operator", namespace="billing")
    viewer = api_for("bob", role="viewer", namespace="reports")
    response = viewer.get("/namespaces")
    assert response.status_code == 200
    assert [n["name"] for n in response.get_json()["items"]] == ["reports"]


def test_namespaces_are_listed_a_page_at_a_time(admin_api):
    names = [f"team-{i:02d}" for i in range(7)]
    for name in names:
        assert admin_api.post("/namespaces", json={"name": name}).status_code == 201
    seen, cursor = [], None
    while True:
        query = f"?limit=3&cursor={cursor}" if cursor else "?limit=3"
        body = admin_api.get("/namespaces" + query).get_json()
        assert len(body["items"]) <= 3
        seen += [item["name"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(["default", *names])
    for bad in ("limit=0", "limit=101", "limit=abc"):
        response = admin_api.get("/namespaces?" + bad)
        assert response.status_code == 422, bad
        assert error_of(response)["details"]["errors"][0]["loc"] == ["query", "limit"]
    response = admin_api.get("/namespaces?cursor=garbage")
    assert response.status_code == 400 and error_of(response)["code"] == "INVALID_CURSOR"
    # A cursor of another list is refused too.
    admin_api.post(
        "/workflows", json={"name": "w", "steps": [{"id": "a", "type": "wait", "duration": "PT1M"}]}
    )
    admin_api.post(
        "/workflows", json={"name": "x", "steps": [{"id": "a", "type": "wait", "duration": "PT1M"}]}
    )
    other = admin_api.get("/workflows?limit=1").get_json()["next_cursor"]
    assert other is not None
    response = admin_api.get(f"/namespaces?cursor={other}")
    assert response.status_code == 400 and error_of(response)["code"] == "INVALID_CURSOR"


def test_superuser_creates_namespace(app, admin_api):
    response = admin_api.post("/namespaces", json={"name": "billing", "max_active_runs": 5})
    assert response.status_code == 201
    assert response.get_json()["name"] == "billing"
    assert response.get_json()["max_active_runs"] == 5
    names = [n["name"] for n in admin_api.get("/namespaces").get_json()["items"]]
    assert names == ["billing", "default"]


def test_duplicate_namespace_is_409(admin_api):
    assert admin_api.post("/namespaces", json={"name": "default"}).status_code == 409


def test_non_superuser_cannot_create_namespace(app, api_for):
    api = api_for("carol", role="admin")
    before = namespace_count(app)
    response = api.post("/namespaces", json={"name": "x"})
    assert response.status_code == 403
    assert error_of(response)["details"]["grant"] == "superuser"
    assert namespace_count(app) == before


def test_bad_input_names_the_field_and_writes_nothing(app, admin_api):
    before = namespace_count(app)
    cases = [
        ({"name": "bad name!"}, ["name"]),
        ({"name": "ok", "extra": 1}, ["extra"]),
        ({"name": 5}, ["name"]),
        ({"name": "x" * 65}, ["name"]),
        ({"name": "ok", "max_active_runs": 0}, ["max_active_runs"]),
        ({}, ["name"]),
    ]
    for body, loc in cases:
        response = admin_api.post("/namespaces", json=body)
        assert response.status_code == 422, body
        error = error_of(response)
        assert error["code"] == "VALIDATION"
        assert error["details"]["errors"][0]["loc"] == loc, body
    assert namespace_count(app) == before


def test_malformed_json_is_400(admin_api):
    response = admin_api.post(
        "/namespaces", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == "BAD_REQUEST"
    response = admin_api.post("/namespaces", json=["a", "list"])
    assert response.status_code == 422
    assert error_of(response)["details"]["errors"][0]["loc"] == ["body"]


def test_unknown_path_and_method_are_json(admin_api):
    response = admin_api.get("/nowhere")
    assert response.status_code == 404 and error_of(response)["code"] == "NOT_FOUND"
    response = admin_api.request("DELETE", "/namespaces")
    assert response.status_code == 405 and error_of(response)["code"] == "METHOD_NOT_ALLOWED"
    # A 405 names the methods the path takes (RFC 9110).
    assert set(response.headers["Allow"].split(", ")) >= {"GET", "POST"}
    response = admin_api.request("PUT", "/schedules/s1")
    assert response.status_code == 405
    assert {"GET", "PATCH", "DELETE"} <= set(response.headers["Allow"].split(", "))


def test_options_and_doubled_slashes_answer_without_html(client, admin_api):
    # OPTIONS names the methods a path takes, with no body (it was an empty text/html page).
    response = admin_api.request("OPTIONS", "/schedules")
    assert response.status_code == 204 and response.data == b""
    assert "text/html" not in response.headers.get("Content-Type", "")
    assert {"GET", "POST"} <= set(response.headers["Allow"].split(", "))
    assert response.headers["X-Frame-Options"] == "DENY"
    # A doubled slash is not found, in JSON (it was a 308 redirect with an HTML page).
    response = admin_api.get("//namespaces")
    assert response.status_code == 404 and error_of(response)["code"] == "NOT_FOUND"
    assert "Location" not in response.headers
    # `/api` itself is an API path.
    assert error_of(client.get("/api"))["code"] == "NOT_FOUND"
    # Leading slashes doubled: not served (the router read them as one).
    # Nor are dot segments: they lead to the API, so the answer is the API's.
    paths = ("//api/v1/namespaces", "///api/v1/health", "/./api/v1/health", "/ns/../api/v1/x")
    for path in paths:
        response = client.get("/", environ_overrides={"PATH_INFO": path})
        assert response.status_code == 404 and error_of(response)["code"] == "NOT_FOUND", path


def test_no_path_is_redirected_to_the_host_a_request_names(client):
    """A console path without its trailing slash was redirected (308) to an absolute URL built
    from the Host header; paths are now matched as written, slash or not."""
    for path in ("/ns/default", "/ns/default?x=1", "//ns/default"):
        response = client.get(path, headers={"Host": "evil.example"})
        assert response.status_code != 308, path
        assert "evil.example" not in response.headers.get("Location", ""), path


def test_a_key_given_twice_or_a_compressed_body_is_400_naming_it(app, admin_api):
    before = namespace_count(app)
    twice = b'{"name": "first", "name": "second"}'
    headers = {"Content-Type": "application/json"}
    response = admin_api.post("/namespaces", data=twice, headers=headers)
    assert response.status_code == 400 and "'name' is given twice" in error_of(response)["message"]
    for encoding in ("gzip", "br"):
        sent = headers | {"Content-Encoding": encoding}
        response = admin_api.post("/namespaces", data=b'{"name": "plain"}', headers=sent)
        assert response.status_code == 400
        assert f"Content-Encoding '{encoding}' is not supported" in error_of(response)["message"]
    assert namespace_count(app) == before
    # `identity` is no encoding at all.
    sent = headers | {"Content-Encoding": "identity"}
    response = admin_api.post("/namespaces", data=b'{"name": "plain"}', headers=sent)
    assert response.status_code == 201


def test_oversized_body_is_413(app, admin_api):
    before = namespace_count(app)
    response = admin_api.post("/namespaces", json={"name": "x" * (2 * 1024 * 1024)})
    assert response.status_code == 413
    assert error_of(response)["code"] == "PAYLOAD_TOO_LARGE"
    assert namespace_count(app) == before


def test_unexpected_error_is_json_500_without_trace(db_url):
    from tests.conftest import make_test_app

    app = make_test_app(db_url, PROPAGATE_EXCEPTIONS=False)

    @app.get("/api/v1/boom")
    def boom():
        raise RuntimeError("secret internals")

    response = app.test_client().get("/api/v1/boom")
    assert response.status_code == 500
    error = error_of(response)
    assert error["code"] == "INTERNAL"
    assert b"secret internals" not in response.data and b"Traceback" not in response.data


def test_unknown_namespace_is_404(admin_api):
    response = admin_api.post(
        "/namespaces/nope/calendar/preview", json={"spec": {"cron": "* * * * *"}}
    )
    assert response.status_code == 404
    assert error_of(response)["code"] == "NOT_FOUND"


def test_an_error_quoting_a_huge_key_is_cut_not_sent_back_whole(app, admin_api):
    """A 300,000-character key given twice came back whole in the message and again in the
    details: a 600 KB answer to a refused request."""
    key = "k" * 300_000
    body = f'{{"{key}": 1, "{key}": 2}}'.encode()
    response = admin_api.post(
        "/namespaces", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert len(response.data) < 5_000
    message = error_of(response)["message"]
    assert message.startswith("body is not valid JSON: the key 'kkk")
    assert message.endswith("characters in all)")


def test_a_huge_key_named_in_an_errors_loc_is_cut_there_too(admin_api):
    """`message` and `msg` were cut, but `loc` still carried the whole key: a refused request
    with a 300,000-character key got a 300 KB answer."""
    key = "k" * 300_000
    response = admin_api.post("/namespaces", json={key: 1})
    assert response.status_code == 422
    assert len(response.data) < 10_000
    locs = [part for error in error_of(response)["details"]["errors"] for part in error["loc"]]
    assert any(str(part).endswith("(300,000 characters in all)") for part in locs), locs


def test_a_body_that_is_not_utf8_says_so_plainly_with_the_byte(admin_api):
    """Python's words came back: "'utf-8' codec can't decode byte 0xff in position 31: …"."""
    body = b'{"name": "team-a", "labels": {"\xff": 1}}'
    response = admin_api.post(
        "/namespaces", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "BAD_REQUEST"
    assert error["message"] == f"body is not valid UTF-8 (at byte {body.index(0xFF)})"
    assert "codec" not in response.get_data(as_text=True)


def test_an_integer_of_5000_digits_is_refused_in_plain_words(admin_api):
    """Python's words came back: "Exceeds the limit (4300 digits) for integer string conversion
    … use sys.set_int_max_str_digits() to increase the limit"."""
    body = b'{"name": ' + b"7" * 5000 + b"}"
    response = admin_api.post(
        "/namespaces", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "BAD_REQUEST"
    assert error["message"] == (
        "body holds an integer of more than 4300 digits, which is not accepted"
    )
    assert "sys." not in response.get_data(as_text=True)


def test_a_non_ascii_x_namespace_is_named_as_sent(admin_api):
    """WSGI hands header values over decoded as latin-1: `nsaа` (a Cyrillic а, sent as UTF-8)
    came back as "namespace 'nsaÐ°' does not exist"."""
    as_wsgi_reads_it = "nsaа".encode().decode("latin-1")
    response = admin_api.get("/schedules", headers={"X-Namespace": as_wsgi_reads_it})
    assert response.status_code == 404
    assert error_of(response)["message"] == "namespace 'nsaа' does not exist"
    # Bytes that are not UTF-8 show as the replacement character, not as latin-1 letters.
    response = admin_api.get("/schedules", headers={"X-Namespace": "nsa\xff"})
    assert response.status_code == 404
    assert error_of(response)["message"] == "namespace 'nsa\ufffd' does not exist"
