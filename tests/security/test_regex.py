"""Input-schema patterns run in linear time (RE2), finding 2."""

from __future__ import annotations

import threading
import time

from tests.security.conftest import deploy, error_of

EVIL = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}


def test_catastrophic_pattern_answers_in_milliseconds_while_health_stays_prompt(app, deployer):
    assert deploy(deployer, "evil", EVIL).status_code == 201
    health_times: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        client = app.test_client()
        while not stop.is_set():
            started = time.perf_counter()
            assert client.get("/api/v1/health").status_code in (200, 503)
            health_times.append(time.perf_counter() - started)

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        started = time.perf_counter()
        response = deployer.post(
            "/runs", json={"workflow": "evil", "input": {"x": "a" * 10_000 + "!"}}
        )
        elapsed = time.perf_counter() - started
    finally:
        stop.set()
        thread.join()
    assert response.status_code == 422
    assert error_of(response)["code"] == "INPUT_SCHEMA"
    # Backtracking would take hours on 10,000 characters; 3 s leaves room for a loaded CI machine
    # (the full suite measured up to 1.5 s here) while still failing the old behaviour.
    assert elapsed < 3.0, elapsed
    assert health_times and max(health_times) < 3.0, max(health_times)
    matching = deployer.post("/runs", json={"workflow": "evil", "input": {"x": "a" * 10_000}})
    assert matching.status_code == 201


def test_operator_saving_a_schedule_with_evil_input_is_fast(api_for, deployer):
    deploy(deployer, "evil", EVIL)
    operator = api_for("otto", "operator")
    started = time.perf_counter()
    body = {
        "id": "s",
        "cron": "* * * * *",
        "action": {"workflow": "evil", "input": {"x": "a" * 5000 + "!"}},
    }
    response = operator.post("/schedules", json=body)
    # Backtracking would never end on 5,000 characters; 3 s is room for a loaded machine.
    assert time.perf_counter() - started < 3.0
    assert response.status_code == 422
    assert error_of(response)["code"] == "INPUT_SCHEMA"


def test_pattern_properties_and_additional_properties_use_re2(deployer):
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert deploy(deployer, "keys", schema).status_code == 201
    started = time.perf_counter()
    response = deployer.post("/runs", json={"workflow": "keys", "input": {"a" * 5000 + "!": 1}})
    # As above: the full suite once took 1.1 s here, late in the run; backtracking never ends.
    assert time.perf_counter() - started < 3.0
    assert response.status_code == 422
    assert deployer.post("/runs", json={"workflow": "keys", "input": {"aaa": 1}}).status_code == 201


def test_a_pattern_re2_cannot_compile_is_422_at_deploy(deployer):
    for schema, loc in (
        (
            {"properties": {"x": {"pattern": "(a)\\1"}}},
            ["input_schema", "properties", "x", "pattern"],
        ),
        (
            {"properties": {"x": {"pattern": "(?=a)b"}}},
            ["input_schema", "properties", "x", "pattern"],
        ),
        ({"patternProperties": {"(?<=a)b": {}}}, ["input_schema", "patternProperties", "(?<=a)b"]),
    ):
        response = deploy(deployer, "bad", schema)
        assert response.status_code == 422, response.get_json()
        error = error_of(response)
        assert error["code"] == "VALIDATION"
        assert error["details"]["errors"][0]["loc"] == loc
    assert deployer.get("/workflows/bad").status_code == 404


def test_references_outside_the_schema_are_refused_at_deploy(deployer):
    for ref in ("https://example.com/schema.json", "file:///etc/passwd", "other.json#/x"):
        response = deploy(deployer, "remote", {"properties": {"x": {"$ref": ref}}})
        assert response.status_code == 422, ref
        assert error_of(response)["details"]["errors"][0]["loc"] == [
            "input_schema",
            "properties",
            "x",
            "$ref",
        ]
    local = {"$defs": {"n": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/n"}}}
    assert deploy(deployer, "local", local).status_code == 201
    refused = deployer.post("/runs", json={"workflow": "local", "input": {"x": "text"}})
    assert refused.status_code == 422 and error_of(refused)["code"] == "INPUT_SCHEMA"


def test_an_oversized_input_schema_is_refused(deployer):
    schema = {"properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    response = deploy(deployer, "huge", schema)
    assert response.status_code == 422
    assert error_of(response)["details"]["errors"][0]["loc"] == ["input_schema"]
