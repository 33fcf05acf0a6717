"""The OpenAPI document matches the routes; the manual clock and tick controls."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate

from app import create_app
from app.runs.definitions import MAX_STEPS, ON_STEP_FAILURE, STEP_ID_RE, STEP_KEYS
from app.schedules.config import LABEL_KEY, MAX_LABEL_VALUE, MAX_LABELS, MAX_SEARCH_ATTRIBUTES


def test_openapi_document_is_valid_and_covers_every_route(app, client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    document = response.get_json()
    validate(document)
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1"):
            continue
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert (path, method.lower()) in documented, (path, method)
    assert len(documented) == sum(
        len(r.methods - {"HEAD", "OPTIONS"})
        for r in app.url_map.iter_rules()
        if r.rule.startswith("/api/v1")
    )


def test_manual_clock_moves_and_ticks(admin_api):
    response = admin_api.post("/admin/clock", json={"now": "2026-03-08T06:59:30Z", "tick": True})
    assert response.status_code == 200
    body = response.get_json()
    assert body["now"] == "2026-03-08T06:59:30Z"
    assert body["rows"] == [] and body["deadlines"] == 0 and body["steps"] == 0
    # Backward is allowed for the manual clock.
    response = admin_api.post("/admin/clock", json={"now": "2026-03-01T00:00:00+01:00"})
    assert response.get_json() == {"now": "2026-02-28T23:00:00Z"}
    health = admin_api.get("/health").get_json()
    assert health["clock"] == "manual"


def test_clock_refuses_bad_instants_and_non_superusers(admin_api, api_for):
    for bad in ("2026-03-08T06:59:30", "2027-08-01T00:05:60Z"):
        response = admin_api.post("/admin/clock", json={"now": bad})
        assert response.status_code == 422
        error = response.get_json()["error"]
        assert error["code"] == "VALIDATION" and error["details"]["errors"][0]["loc"] == ["now"]
    operator = api_for("op")
    assert operator.post("/admin/clock", json={"now": "2026-03-08T06:59:30Z"}).status_code == 403
    assert operator.post("/admin/tick", json={}).status_code == 403


def test_tick_endpoint_returns_rows(admin_api):
    response = admin_api.post("/admin/tick", json={})
    assert response.status_code == 200
    assert set(response.get_json()) == {"now", "rows", "deadlines", "steps", "failures"}
    assert response.get_json()["failures"] == []
    assert response.get_json()["now"] == "2026-01-05T12:00:00Z"
    health = admin_api.get("/health").get_json()
    assert health["ticker"]["last_tick_at"] is not None


def test_manual_clock_is_refused_outside_testing(db_url):
    with pytest.raises(RuntimeError, match="ALMANAC_TESTING=1"):
        create_app(
            {
                "DATABASE_URL": db_url,
                "CLOCK": "manual",
                "TESTING": False,
                "SCHEDULER": "off",
                "SECRET_KEY": "x",
            }
        )


def test_system_clock_answers_409_on_clock_route(db_url, accounts):
    from tests.conftest import Api, make_test_app

    app = make_test_app(db_url, CLOCK="system")
    account = accounts.create("sys", role="admin", superuser=True)
    api = Api(app.test_client(), account.token)
    response = api.post("/admin/clock", json={"now": "2026-03-08T06:59:30Z"})
    assert response.status_code == 409


@pytest.mark.parametrize("writers", ["two", "0", "-1", "1.5"])
def test_tick_writers_that_are_not_a_count_of_one_or_more_are_refused_at_start(db_url, writers):
    with pytest.raises(RuntimeError, match="ALMANAC_TICK_WRITERS must be a whole number"):
        create_app({"DATABASE_URL": db_url, "SCHEDULER": "off", "TICK_WRITERS": writers})


def test_tick_writers_read_from_the_environment_become_a_number(db_url, monkeypatch):
    monkeypatch.setenv("ALMANAC_TICK_WRITERS", "3")
    app = create_app({"DATABASE_URL": db_url, "SCHEDULER": "off"})
    assert app.config["TICK_WRITERS"] == 3


def test_published_bounds_are_the_ones_the_checks_apply(client):
    """Generated clients and fuzzers trust the document: a bound looser than the server's makes
    them send what is refused (and the definition's own checks, not pydantic, apply these)."""
    schemas = client.get("/api/v1/openapi.json").get_json()["components"]["schemas"]
    key_rule = {"pattern": f"^{LABEL_KEY.pattern}$"}
    for model in ("ScheduleIn", "SchedulePatchIn", "RunIn"):
        labels = schemas[model]["properties"]["labels"]
        assert labels["maxProperties"] == MAX_LABELS and labels["propertyNames"] == key_rule
        values = labels["additionalProperties"]
        assert MAX_LABEL_VALUE in {values.get("maxLength")} | {
            kind.get("maxLength") for kind in values.get("anyOf", [])
        }, (model, values)
        attributes = schemas[model]["properties"]["search_attributes"]
        assert attributes["maxProperties"] == MAX_SEARCH_ATTRIBUTES, model
        assert attributes["propertyNames"] == key_rule, model
    assert schemas["ScheduleIn"]["properties"]["schedule_id"]["minLength"] == 1
    steps = schemas["DefinitionIn"]["properties"]["steps"]
    assert (steps["minItems"], steps["maxItems"]) == (1, MAX_STEPS)
    step = schemas["StepIn"]["properties"]
    assert step["id"]["pattern"] == f"^{STEP_ID_RE.pattern}$"
    assert set(step["type"]["enum"]) == set(STEP_KEYS)
    on_failure = schemas["DefinitionIn"]["properties"]["on_step_failure"]["enum"]
    assert tuple(on_failure) == ON_STEP_FAILURE


def _restricted_query_parameters(document: dict) -> list[tuple[str, str, dict]]:
    """(path, name, schema) of every query parameter published narrower than any string."""
    found = []
    for path, operations in document["paths"].items():
        if "{" in path or "get" not in operations:
            continue
        for parameter in operations["get"]["parameters"]:
            schema = parameter["schema"]
            if parameter["in"] == "query" and ("enum" in schema or "pattern" in schema):
                found.append((path.removeprefix("/api/v1"), parameter["name"], schema))
            elif parameter["in"] == "query" and schema.get("type") == "boolean":
                found.append((path.removeprefix("/api/v1"), parameter["name"], schema))
    return found


def test_published_query_values_are_the_ones_the_server_takes(admin_api, client):
    """A generated client offers what the document publishes: each value it allows is served,
    and a value outside it is the 422 naming the parameter."""
    document = client.get("/api/v1/openapi.json").get_json()
    restricted = _restricted_query_parameters(document)
    named = {(path, name) for path, name, _ in restricted}
    assert {
        ("/schedules", "status"),
        ("/schedules", "include_deleted"),
        ("/runs", "status"),
        ("/tasks", "status"),
        ("/incidents", "status"),
        ("/activations", "status"),
    } <= named
    for path, name, schema in restricted:
        if schema.get("type") == "boolean":
            allowed, refused = ["true", "false"], ["maybe"]
        elif "enum" in schema:
            allowed, refused = schema["enum"], ["bogus", schema["enum"][0].upper()]
        else:
            words = schema["pattern"].split("(?:", 2)[2].split(")")[0].split("|")
            allowed = [*words, ",".join(words), f",{words[0]},,{words[-1]},"]
            refused = ["bogus", words[0] + words[-1], f"{words[0]};{words[-1]}"]
            for value in allowed:
                assert re.fullmatch(schema["pattern"], value), (path, value)
            for value in refused:
                assert not re.fullmatch(schema["pattern"], value), (path, value)
        for value in allowed:
            response = admin_api.get(f"{path}?{name}={value}")
            assert response.status_code == 200, (path, name, value, response.get_json())
        for value in refused:
            response = admin_api.get(f"{path}?{name}={value}")
            assert response.status_code == 422, (path, name, value)
            errors = response.get_json()["error"]["details"]["errors"]
            assert errors[0]["loc"] == ["query", name], (path, value)
