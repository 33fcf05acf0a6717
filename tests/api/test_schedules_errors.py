"""Every 4xx of the schedule routes with its code; a refused request writes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.db import Schedule


@pytest.fixture
def ready(h):  # noqa: F811 - the imported fixture
    """One schedule `s` and a second ready activation; returns (harness, activation)."""
    activation = h.workflow(
        input_schema={
            "type": "object",
            "required": ["mode"],
            "properties": {"mode": {"type": "string"}},
        }
    )
    h.save(
        {
            "id": "s",
            "cron": "*/5 * * * *",
            "activation_id": activation,
            "input": {"mode": "nightly"},
        },
        expect=201,
    )
    return h, activation


def base(activation, **changes):
    body = {"id": "new", "cron": "*/5 * * * *", "activation_id": activation, "input": {"mode": "m"}}
    return {k: v for k, v in (body | changes).items() if v is not ...}


CASES = [
    # (name, body changes, status, code, loc)
    ("unknown field", {"colour": "red"}, 422, "VALIDATION", ["colour"]),
    (
        "unknown action field",
        {"action": {"kind": "x"}, "activation_id": ...},
        422,
        "VALIDATION",
        ["action", "kind"],
    ),
    ("bad id", {"id": "no spaces"}, 422, "VALIDATION", ["id"]),
    ("long id", {"id": "x" * 129}, 422, "VALIDATION", ["id"]),
    # `.` and `..` are a URL path's own segments: the schedule's console page is unreachable.
    ("dots id", {"id": ".."}, 422, "VALIDATION", ["id"]),
    ("dot schedule_id", {"id": ..., "schedule_id": "."}, 422, "VALIDATION", ["schedule_id"]),
    ("three dots id", {"id": "..."}, 422, "VALIDATION", ["id"]),
    ("two ids", {"schedule_id": "other"}, 422, "VALIDATION", ["id"]),
    ("no spec", {"cron": ...}, 422, "VALIDATION", ["spec"]),
    ("no action", {"activation_id": ..., "input": ...}, 422, "VALIDATION", ["action"]),
    ("both targets", {"action": {"workflow": "invoice-sync"}}, 422, "VALIDATION", ["action"]),
    ("cron twice", {"spec": {"cron_expressions": ["0 * * * *"]}}, 422, "VALIDATION", ["cron"]),
    ("bad overlap", {"overlap_policy": "sometimes"}, 422, "VALIDATION", ["overlap_policy"]),
    ("bad missed", {"missed_policy": "catch_up"}, 422, "VALIDATION", ["missed_policy"]),
    ("jitter", {"jitter_seconds": 3601}, 422, "VALIDATION", ["jitter_seconds"]),
    ("max runs", {"max_runs": 0}, 422, "VALIDATION", ["max_runs"]),
    ("label value", {"labels": {"team": 5}}, 422, "VALIDATION", ["labels", "team"]),
    ("label key", {"labels": {"bad key!": "x"}}, 422, "VALIDATION", ["labels", "bad key!"]),
    ("notes", {"notes": "n" * 4097}, 422, "VALIDATION", ["notes"]),
    # Copied onto every run, whose search attributes are strings (`?search_attribute=k:v`).
    (
        "search attribute",
        {"search_attributes": {"n": 5}},
        422,
        "VALIDATION",
        ["search_attributes", "n"],
    ),
    (
        "search attribute key",
        {"search_attributes": {"a:b": "c"}},
        422,
        "VALIDATION",
        ["search_attributes", "a:b"],
    ),
    (
        "search attribute object",
        {"search_attributes": {"k": {"a": [1]}}},
        422,
        "VALIDATION",
        ["search_attributes", "k"],
    ),
    (
        "search attributes",
        {"search_attributes": {f"k{i}": "v" for i in range(65)}},
        422,
        "VALIDATION",
        ["search_attributes"],
    ),
    (
        "timeout",
        {"action": {"run_timeout_seconds": 0}, "activation_id": ...},
        422,
        "VALIDATION",
        ["action", "run_timeout_seconds"],
    ),
    (
        "unknown activation",
        {"activation_id": "00000000-0000-4000-8000-000000000001"},
        422,
        "VALIDATION",
        ["activation_id"],
    ),
    (
        "no ready activation",
        {
            "activation_id": ...,
            "input": ...,
            "action": {"workflow": "nothing", "input": {"mode": "m"}},
        },
        422,
        "VALIDATION",
        ["action", "workflow"],
    ),
    ("cron grammar", {"cron": "61 * * * *"}, 422, "CALENDAR_INVALID", ["cron", "minute"]),
    ("names", {"cron": "0 0 * * MON"}, 422, "CALENDAR_INVALID", ["cron", "day of week"]),
    ("time zone", {"timezone": "Mars/Olympus"}, 422, "CALENDAR_INVALID", ["timezone"]),
    (
        "interval months",
        {"cron": ..., "spec": {"intervals": [{"every": "P1M"}]}},
        422,
        "CALENDAR_INVALID",
        ["spec", "intervals", 0, "every"],
    ),
    (
        "past end",
        {
            "cron": ...,
            "spec": {"cron_expressions": ["0 * * * *"], "end_at": "2025-01-01T00:00:00Z"},
        },
        422,
        "SCHEDULE_RANGE",
        ["spec", "end_at"],
    ),
    ("input schema", {"input": {"mode": 5}}, 422, "INPUT_SCHEMA", ["input", "mode"]),
    ("missing input", {"input": {}}, 422, "INPUT_SCHEMA", ["input"]),
]


@pytest.mark.parametrize("name, changes, status, code, loc", CASES, ids=[c[0] for c in CASES])
def test_bad_saves_are_refused_and_write_nothing(ready, name, changes, status, code, loc):
    hs, activation = ready
    before = hs.counts()
    response = hs.api.post("/schedules", json=base(activation, **changes))
    assert response.status_code == status, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code
    if loc is not None:
        assert error["details"]["errors"][0]["loc"] == loc
    assert hs.counts() == before


def test_a_retired_activation_is_refused_at_save(ready):
    hs, _ = ready
    retired = hs.workflow("old")
    hs.retire(retired)
    before = hs.counts()
    response = hs.api.post("/schedules", json={"cron": "* * * * *", "activation_id": retired})
    assert response.status_code == 422
    assert "retired" in response.get_json()["error"]["message"]
    assert hs.counts() == before


def test_non_json_bodies_and_bad_headers_are_bad_requests(ready):
    hs, _ = ready
    before = hs.counts()
    response = hs.api.post("/schedules", data="{nope", headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "BAD_REQUEST"
    response = hs.api.post("/schedules", json=[1, 2])
    assert response.status_code == 422
    for tag in ("v1", "W/1", '"1', '1"', 'W/"1', "1, 2", '"-1"'):
        response = hs.api.post("/schedules/s/pause", json={}, headers={"If-Match": tag})
        assert response.status_code == 400, tag
    response = hs.api.post(
        "/schedules", data="x" * (1024 * 1024 + 1), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert hs.counts() == before


def test_unauthenticated_and_unknown_things(ready, client):
    hs, _ = ready
    before = hs.counts()
    assert client.get("/api/v1/schedules").status_code == 401
    assert (
        client.post("/api/v1/schedules", json={}).get_json()["error"]["code"] == "UNAUTHENTICATED"
    )
    for method, path in (
        ("GET", "/schedules/nope"),
        ("PATCH", "/schedules/nope"),
        ("POST", "/schedules/nope/pause"),
        ("POST", "/schedules/nope/trigger"),
        ("GET", "/schedules/nope/history"),
        ("DELETE", "/schedules/nope"),
        ("GET", "/schedules/nope/occurrences"),
        ("GET", "/namespaces/ghost/schedules"),
    ):
        response = hs.api.request(method, path, json={})
        assert response.status_code == 404, (method, path)
        assert response.get_json()["error"]["code"] == "NOT_FOUND"
    # A change that names a revision of a schedule that does not exist is a revision conflict.
    for method, path in (
        ("PATCH", "/schedules/nope"),
        ("POST", "/schedules/nope/pause"),
        ("POST", "/schedules/nope/resume"),
        ("DELETE", "/schedules/nope"),
        ("POST", "/schedules"),
    ):
        body = {"id": "nope", "cron": "* * * * *", "workflow": "w"} if path == "/schedules" else {}
        response = hs.api.request(method, path, json=body, headers={"If-Match": "1"})
        assert response.status_code == 409, (method, path)
        error = response.get_json()["error"]
        assert error["code"] == "SCHEDULE_REVISION", (method, path)
        assert error["details"]["current_revision"] is None
    assert hs.counts() == before


def test_patch_refusals_write_nothing(ready):
    hs, _ = ready
    before = hs.counts()
    for body, code, loc in (
        ({"id": "other"}, "VALIDATION", ["id"]),
        # A shorthand's error names the shorthand, as a save names it.
        ({"cron": "99 * * * *"}, "CALENDAR_INVALID", ["cron", "minute"]),
        ({"cron": "0 0 30 2 *"}, "CALENDAR_INVALID", ["cron", "day of month"]),
        ({"timezone": "Nowhere"}, "CALENDAR_INVALID", ["timezone"]),
        ({"input": {"mode": 1}}, "INPUT_SCHEMA", ["input", "mode"]),
        ({"bogus": 1}, "VALIDATION", ["bogus"]),
        ({"search_attributes": {"n": 5}}, "VALIDATION", ["search_attributes", "n"]),
        (
            {"overlap_policy": None, "spec": {"timezone": "Nowhere"}},
            "CALENDAR_INVALID",
            ["spec", "timezone"],
        ),
    ):
        response = hs.api.request("PATCH", "/schedules/s", json=body, headers={"If-Match": "1"})
        assert response.status_code == 422, body
        error = response.get_json()["error"]
        assert error["code"] == code and error["details"]["errors"][0]["loc"] == loc, error
    assert hs.counts() == before


def test_a_trigger_with_a_bad_policy_and_a_resume_without_a_target_write_nothing(ready):
    hs, activation = ready
    before = hs.counts()
    response = hs.post("s", "trigger", {"overlap_policy": "maybe"})
    assert response.status_code == 422
    hs.post("s", "pause")
    hs.retire(activation)
    before = hs.counts()
    response = hs.post("s", "resume")
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "CONFLICT"
    assert response.get_json()["error"]["details"]["reason"] == "activation_not_ready"
    assert hs.counts() == before


@pytest.mark.parametrize(
    ("component", "field", "loc"),
    [
        ("ScheduleIn", "max_runs", ["max_runs"]),
        ("ActionIn", "execution_timeout_seconds", ["action", "execution_timeout_seconds"]),
        ("ActionIn", "run_timeout_seconds", ["action", "run_timeout_seconds"]),
    ],
)
def test_the_published_maximum_is_the_one_the_server_applies(ready, client, component, field, loc):
    """A generated client checks values against the OpenAPI document: its maximum must be the
    server's, or the client sends what the server refuses."""
    hs, activation = ready
    schemas = client.get("/api/v1/openapi.json").get_json()["components"]["schemas"]
    published = schemas[component]["properties"][field]["anyOf"][0]
    highest = published["maximum"]

    def body(value: int, schedule_id: str) -> dict:
        if loc[0] == "action":
            return base(activation, id=schedule_id, activation_id=..., input=...) | {
                "action": {"activation_id": activation, "input": {"mode": "m"}, field: value}
            }
        return base(activation, id=schedule_id, **{field: value})

    before = hs.counts()
    refused = hs.save(body(highest + 1, "over"), expect=422)
    assert refused["error"]["details"]["errors"][0]["loc"] == loc, refused
    assert hs.counts() == before
    hs.save(body(highest, "at"), expect=201)


def test_a_patch_sets_and_removes_search_attributes_one_by_one(ready):
    hs, _ = ready
    patch = {"search_attributes": {"tenant": "42", "region": "eu"}}
    response = hs.api.request("PATCH", "/schedules/s", json=patch, headers={"If-Match": "1"})
    assert response.get_json()["search_attributes"] == {"tenant": "42", "region": "eu"}
    patch = {"search_attributes": {"region": None}}
    response = hs.api.request("PATCH", "/schedules/s", json=patch, headers={"If-Match": "2"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["search_attributes"] == {"tenant": "42"}


def test_a_schedule_saved_earlier_with_a_dots_id_stays_reachable_through_the_api(ready):
    """Ids of dots alone are refused now; a row saved before keeps its reads and changes."""
    hs, _ = ready
    with hs.db.session() as session:
        session.execute(update(Schedule).values(schedule_id=".."))
        session.commit()
    # As the SDK sends it (`%2E%2E`), since an HTTP client removes a bare `..` segment.
    assert hs.api.get("/schedules/%2E%2E").get_json()["schedule_id"] == ".."
    assert hs.api.get("/schedules/%2E%2E/history").status_code == 200
    paused = hs.api.post("/schedules/%2E%2E/pause", json={}, headers={"If-Match": "1"})
    assert paused.status_code == 200, paused.get_json()
    patched = hs.api.request(
        "PATCH", "/schedules/%2E%2E", json={"notes": "old id"}, headers={"If-Match": "2"}
    )
    assert patched.status_code == 200 and patched.get_json()["notes"] == "old id"
    deleted = hs.api.request("DELETE", "/schedules/%2E%2E", headers={"If-Match": "3"})
    assert deleted.status_code == 200, deleted.get_json()
    assert deleted.get_json()["status"] == "deleted"


def test_a_label_value_too_long_is_named_with_its_key_and_unit(ready):
    hs, activation = ready
    before = hs.counts()
    response = hs.api.post("/schedules", json=base(activation, labels={"team": "x" * 257}))
    assert response.status_code == 422
    error = response.get_json()["error"]["details"]["errors"][0]
    assert error == {"loc": ["labels", "team"], "msg": "must be a string of at most 256 characters"}
    assert hs.counts() == before
