"""Odd input is a 4xx, never a 500; identifiers are matched whole (finding 6)."""

from __future__ import annotations

import json

from tests.security.conftest import NOOP_STEPS as NOOP
from tests.security.conftest import csrf_from, deploy, error_of, sign_in


def test_stray_ns_and_url_for_arguments_in_the_query_do_not_500(client, accounts, admin_api):
    deploy(admin_api)
    # More than one page, so the list builds a "next page" link from the query arguments.
    for index in range(51):
        body = {"id": f"s{index:02d}", "cron": "0 * * * *", "action": {"workflow": "wf"}}
        assert admin_api.post("/schedules", json=body).status_code == 201
    account = accounts.create("alice")
    sign_in(client, "alice", account.password)
    for query in ("?ns=x", "?_external=1", "?_anchor=x", "?_scheme=javascript", "?ns=y&q=s"):
        response = client.get("/ns/default/schedules" + query)
        assert response.status_code == 200, (query, response.status_code)
        html = response.get_data(as_text=True)
        assert "cursor=" in html and "javascript:" not in html and "http://" not in html, query


def test_identifiers_with_a_trailing_newline_are_refused(admin_api):
    assert deploy(admin_api).status_code == 201
    run = admin_api.post("/runs", json={"workflow": "wf", "run_id": "x\n"})
    assert run.status_code == 422 and error_of(run)["details"]["errors"][0]["loc"] == ["run_id"]
    workflow = deploy(admin_api, "wf\n")
    assert workflow.status_code == 422
    # Naming a workflow to activate, run or schedule: refused as its deploy is, not looked up.
    for path in ("/activations", "/runs"):
        named = admin_api.post(path, json={"workflow": "wf\n"})
        assert named.status_code == 422, (path, named.get_json())
        assert error_of(named)["details"]["errors"][0]["loc"] == ["workflow"]
    for body in ({"workflow": "wf\n"}, {"action": {"workflow": "wf\n"}}):
        saved = admin_api.post("/schedules", json={"id": "nl", "cron": "* * * * *"} | body)
        assert saved.status_code == 422, saved.get_json()
        error = error_of(saved)["details"]["errors"][0]
        assert error["loc"][-1] == "workflow" and "starting alphanumeric" in error["msg"]
    namespace = admin_api.post("/namespaces", json={"name": "default\n"})
    assert namespace.status_code == 422
    schedule = admin_api.post(
        "/schedules", json={"id": "s\n", "cron": "* * * * *", "action": {"workflow": "wf"}}
    )
    assert schedule.status_code == 422
    labels = admin_api.post(
        "/schedules",
        json={"id": "s", "cron": "* * * * *", "action": {"workflow": "wf"}, "labels": {"k\n": "v"}},
    )
    assert labels.status_code == 422
    steps = [{"id": "wait", "type": "signal", "signal": "go\n"}]
    assert deploy(admin_api, "sig", steps=steps).status_code == 422
    started = admin_api.post("/runs", json={"workflow": "wf", "run_id": "r1"})
    assert started.status_code == 201
    signal = admin_api.post("/runs/r1/signals/go%0A", json={})
    assert signal.status_code in (404, 409, 422)
    error_of(signal)
    assert admin_api.get("/namespaces/default%0A/schedules").status_code == 404


def test_year_9999_and_0001_and_huge_weeks_in_every_instant_field(admin_api):
    deploy(admin_api)
    admin_api.post(
        "/schedules", json={"id": "s", "cron": "* * * * *", "action": {"workflow": "wf"}}
    )
    for instant in ("9999-12-31T23:59:59Z", "0001-01-01T00:00:00+05:00"):
        backfill = admin_api.post("/schedules/s/backfill", json={"from": instant, "to": instant})
        assert backfill.status_code in (400, 422), backfill.get_json()
        error_of(backfill)
        spec = {"cron": "* * * * *", "start_at": instant}
        preview = admin_api.post("/calendar/preview", json={"spec": spec})
        assert preview.status_code == 422
    wait = [{"id": "w", "type": "wait", "duration": "P142857142W"}]
    response = deploy(admin_api, "longwait", steps=wait)
    assert response.status_code == 422
    error_of(response)


def test_nul_anywhere_in_a_request_is_422_naming_where_and_writes_nothing(
    client, accounts, admin_api
):
    # PostgreSQL's text columns cannot hold NUL: it answered 500 there, and SQLite stored it.
    deploy(admin_api)
    good = {"id": "s", "cron": "0 * * * *", "action": {"workflow": "wf"}}
    cases = [
        ("post", "/schedules", good | {"notes": "a\u0000b"}, ["body", "notes"]),
        ("post", "/schedules", good | {"labels": {"k\u0000": "v"}}, ["body", "labels", "k\u0000"]),
        (
            "post",
            "/runs",
            {"workflow": "wf", "input": {"x": ["ok", "a\u0000"]}},
            ["body", "input", "x", 1],
        ),
        ("get", "/schedules/a%00b", None, ["path"]),
        ("get", "/runs?workflow=a%00b", None, ["query", "workflow"]),
        ("get", "/namespaces/%00/schedules", None, ["path"]),
    ]
    for method, path, body, loc in cases:
        response = getattr(admin_api, method)(path, **({"json": body} if body else {}))
        assert response.status_code == 422, (path, response.status_code, response.data[:200])
        error = error_of(response)
        assert error["code"] == "VALIDATION" and error["details"]["errors"][0]["loc"] == loc
        assert "NUL" in error["details"]["errors"][0]["msg"]
    assert admin_api.get("/schedules").get_json()["items"] == []
    assert admin_api.get("/runs").get_json()["items"] == []
    # A backslash followed by the text u0000 is no NUL: saved as written.
    text = good | {"notes": "C:\\u0000"}
    assert admin_api.post("/schedules", json=text).status_code == 201
    assert admin_api.get("/schedules/s").get_json()["notes"] == "C:\\u0000"
    # The console refuses a NUL in a query or form field the same way, with its error page.
    account = accounts.create("alice", role="admin")
    sign_in(client, "alice", account.password)
    assert client.get("/ns/default/schedules?q=a%00").status_code == 422


def test_a_lone_surrogate_in_any_json_value_is_422_naming_where_and_writes_nothing(admin_api):
    # Not Unicode text: stored on SQLite it failed every page, run and worker batch that read
    # it (a task title held every worker of every namespace); PostgreSQL answered 500.
    deploy(admin_api)
    good = {"id": "s", "cron": "0 * * * *", "action": {"workflow": "wf"}}
    task = [{"id": "t", "type": "task", "title": "T\ud800"}]
    cases = [
        ("/schedules", good | {"input": {"a": "\udfff"}}, ["body", "input", "a"]),
        ("/schedules", good | {"input": {"k\ud800": 1}}, ["body", "input", "k\ufffd"]),
        (
            "/runs",
            {"workflow": "wf", "input": {"x": ["ok", "a\ud800b"]}},
            ["body", "input", "x", 1],
        ),
        ("/workflows", {"name": "titled", "steps": task}, ["body", "steps", 0, "title"]),
        (
            "/workflows",
            {"name": "d", "description": "\udc00", "steps": NOOP},
            ["body", "description"],
        ),
    ]
    for path, body, loc in cases:
        response = admin_api.post(path, json=body)
        assert response.status_code == 422, (path, response.status_code, response.data[:200])
        error = error_of(response)
        assert error["code"] == "VALIDATION" and error["details"]["errors"][0]["loc"] == loc
        assert "lone surrogate" in error["details"]["errors"][0]["msg"]
    # The same character sent as raw (CESU-8) bytes instead of an escape.
    raw = b'{"workflow": "wf", "input": {"x": "\xed\xa0\x80"}}'
    response = admin_api.post("/runs", data=raw, content_type="application/json")
    assert response.status_code == 422 and error_of(response)["details"]["errors"][0]["loc"] == [
        "body",
        "input",
        "x",
    ]
    assert admin_api.get("/schedules").get_json()["items"] == []
    assert admin_api.get("/runs").get_json()["items"] == []
    assert [w["name"] for w in admin_api.get("/workflows").get_json()["items"]] == ["wf"]
    # A pair of surrogates escaping one character beyond the BMP is that character.
    paired = good | {"notes": "\ud83d\ude00", "input": {"e": "\ud83d\ude00"}}
    text = json.dumps(paired)  # escapes the emoji as its pair
    assert "\\ud83d\\ude00" in text
    response = admin_api.post("/schedules", data=text, content_type="application/json")
    assert response.status_code == 201, response.get_json()
    saved = admin_api.get("/schedules/s").get_json()
    assert saved["action"]["input"] == {"e": "\U0001f600"} and saved["notes"] == "\U0001f600"


def test_fields_take_only_their_declared_json_types(admin_api):
    # No coercion: `true` is not 1 and "7" is not 7 (they were stored as 1 and 7).
    deploy(admin_api)
    good = {"id": "s", "cron": "0 * * * *", "action": {"workflow": "wf"}}
    cases = [
        ("/schedules", good | {"jitter_seconds": True}, ["jitter_seconds"]),
        ("/schedules", good | {"max_runs": "7"}, ["max_runs"]),
        (
            "/schedules",
            good | {"action": {"workflow": "wf", "run_timeout_seconds": 60.0}},
            ["action", "run_timeout_seconds"],
        ),
        ("/calendar/preview", {"cron": "0 2 * * *", "count": "3"}, ["count"]),
        ("/namespaces", {"name": "coerced", "max_active_runs": True}, ["max_active_runs"]),
        ("/activations", {"workflow": "wf", "version": True}, ["version"]),
        ("/runs", {"workflow": "wf", "timeout_seconds": "60"}, ["timeout_seconds"]),
        ("/admin/tick", {"work": 1}, ["work"]),
        # A schedule's queue follows the rule of `POST /runs`, so a worker can name it.
        (
            "/schedules",
            good | {"action": {"workflow": "wf", "queue": "bad queue!"}},
            ["action", "queue"],
        ),
        (
            "/workflows",
            {"name": "d", "description": {"not": "text"}, "steps": NOOP},
            ["description"],
        ),
        ("/workflows", {"name": "d", "description": "x" * 4097, "steps": NOOP}, ["description"]),
        (
            "/workflows",
            {"name": "d", "steps": [{**NOOP[0], "description": 5}]},
            ["steps", 0, "description"],
        ),
    ]
    for path, body, loc in cases:
        response = admin_api.post(path, json=body)
        assert response.status_code == 422, (path, body, response.get_json())
        assert error_of(response)["details"]["errors"][0]["loc"] == loc, (path, body)
    assert admin_api.get("/schedules").get_json()["items"] == []
    assert admin_api.get("/runs").get_json()["items"] == []
    assert [n["name"] for n in admin_api.get("/namespaces").get_json()["items"]] == ["default"]
    assert admin_api.get("/workflows/d").status_code == 404
    assert admin_api.post("/schedules", json=good | {"jitter_seconds": 7}).status_code == 201


def test_a_form_encoded_body_is_400_saying_to_send_json(admin_api):
    # `curl -d '{...}'` sends the JSON as a form: it was read as an empty object before, and
    # the answer named required fields the caller had in fact sent.
    deploy(admin_api)
    body = json.dumps({"id": "s", "cron": "0 * * * *", "action": {"workflow": "wf"}})
    form = "application/x-www-form-urlencoded"
    for path in ("/schedules", "/runs", "/workflows"):
        response = admin_api.post(path, data=body, content_type=form)
        assert response.status_code == 400, (path, response.get_json())
        error = error_of(response)
        assert error["code"] == "BAD_REQUEST"
        assert "Content-Type: application/json" in error["message"]
    assert admin_api.get("/schedules").get_json()["items"] == []
    # An empty form body (`curl -d ''`) is an empty object, as an empty body is.
    ran = admin_api.post("/runs", data="", content_type=form)
    assert ran.status_code == 422 and "workflow" in str(error_of(ran)["details"])
    # The same text with the JSON type (or none at all) is a save.
    assert (
        admin_api.post("/schedules", data=body, content_type="application/json").status_code == 201
    )


def test_a_number_too_large_for_a_float_is_400_and_writes_nothing(admin_api, client, accounts):
    """`1e400` parses to infinity: PostgreSQL's json refused it with a 500, SQLite stored it and
    then answered `Infinity`, which is not JSON, on every read. Refused like `NaN`."""
    deploy(admin_api)
    good = '{"id": "s", "cron": "0 * * * *", "action": {"workflow": "wf"}'
    cases = [
        ("/schedules", good + ', "memo": {"a": 1e400}}'),
        ("/runs", '{"workflow": "wf", "input": {"n": -1e999}}'),
        (
            "/workflows",
            '{"name": "big", "steps": [{"id": "a", "type": "action", '
            '"action": "noop", "args": {"x": 1e400}}]}',
        ),
    ]
    for path, text in cases:
        response = admin_api.post(path, data=text, content_type="application/json")
        assert response.status_code == 400, (path, response.status_code, response.data[:200])
        error = error_of(response)
        assert error["code"] == "BAD_REQUEST" and "too large to store" in error["message"]
    run = admin_api.post("/runs", json={"workflow": "wf", "run_id": "r"})
    assert run.status_code == 201
    signal = admin_api.post(
        "/runs/r/signals/go", data='{"payload": {"a": 1e400}}', content_type="application/json"
    )
    assert signal.status_code == 400
    assert admin_api.get("/schedules").get_json()["items"] == []
    assert [r["run_id"] for r in admin_api.get("/runs").get_json()["items"]] == ["r"]
    assert [w["name"] for w in admin_api.get("/workflows").get_json()["items"]] == ["wf"]
    # Large numbers that fit stay numbers.
    fits = admin_api.post(
        "/schedules", data=good + ', "memo": {"a": 1e300}}', content_type="application/json"
    )
    assert fits.status_code == 201 and fits.get_json()["memo"] == {"a": 1e300}
    # The console's deploy form reads its definition as the API reads a body.
    account = accounts.create("alice", role="admin")
    sign_in(client, "alice", account.password)
    form = client.get("/ns/default/workflows")
    definition = (
        '{"name": "big", "steps": [{"id": "a", "type": "action", "action": "noop", '
        '"args": {"x": 1e400}}]}'
    )
    page = client.post(
        "/ns/default/workflows", data={"csrf_token": csrf_from(form), "definition": definition}
    )
    assert "too large to store" in page.get_data(as_text=True)
    for constant in ("NaN", "Infinity"):
        text = definition.replace("1e400", constant)
        page = client.post(
            "/ns/default/workflows", data={"csrf_token": csrf_from(form), "definition": text}
        )
        assert "not valid JSON" in page.get_data(as_text=True), constant
    assert [w["name"] for w in admin_api.get("/workflows").get_json()["items"]] == ["wf"]


def test_nul_in_a_path_no_route_matches_is_422_in_the_faces_own_error(client):
    """The NUL check runs before routing: on a path no route (or method) matched, or a static
    file, its refusal had no handler and came out as the server's bare 500 page."""
    for method, path in (
        ("GET", "/api/v1/bogus/%00"),
        ("PUT", "/api/v1/namespaces/default/schedules/%00"),
        ("GET", "/api/v1/namespaces/default/tasks/%00/complete"),
    ):
        response = client.open(path, method=method)
        assert response.status_code == 422, (method, path)
        error = error_of(response)
        assert error["code"] == "VALIDATION" and error["details"]["errors"][0]["loc"] == ["path"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    for path in ("/%00", "/static/%00"):
        response = client.get(path)
        assert response.status_code == 422 and response.mimetype == "text/html", path
        assert "must not contain the NUL character" in response.get_data(as_text=True)
        assert "Content-Security-Policy" in response.headers
