"""A query parameter an operation reads once, given twice, is refused (422 naming it): read as its
first value, the others were silently dropped and a list answered other rows, or none."""

from __future__ import annotations

from typing import Any

PARAMS = {"{ns}": "default", "{schedule_id}": "s", "{name}": "invoice-sync"}


def refused_naming(response: Any, name: str) -> None:
    assert response.status_code == 422, (name, response.status_code, response.get_json())
    errors = response.get_json()["error"]["details"]["errors"]
    assert [error["loc"] for error in errors] == [["query", name]], errors
    assert "given 2 times" in errors[0]["msg"], errors


def test_a_schedule_status_given_twice_is_refused_not_read_as_its_first(h):
    h.create("a")
    for schedule_id in ("b", "c", "d", "e"):
        h.create(schedule_id)
        assert h.post(schedule_id, "pause").status_code == 200
    # Four paused, one active: the first status alone answered "a", the second was dropped.
    refused_naming(h.api.get("/schedules?status=active&status=paused"), "status")
    refused_naming(h.api.get("/schedules?status=paused&status=active"), "status")
    # An empty value counts: the list read "" (no filter) and the cursor bound `paused`.
    refused_naming(h.api.get("/schedules?status=&status=paused"), "status")
    # No page, so no cursor to carry to the same statuses in another order.
    refused_naming(h.api.get("/schedules?status=paused&status=active&limit=2"), "status")
    # The page size and the cursor are read once too.
    refused_naming(h.api.get("/schedules?limit=2&limit=50"), "limit")
    page = h.api.get("/schedules?status=paused&limit=2").get_json()
    cursor = page["next_cursor"]
    refused_naming(h.api.get(f"/schedules?status=paused&cursor={cursor}&cursor={cursor}"), "cursor")
    # Given once, the filter pages through every paused schedule; `label` repeats (all match).
    seen = [item["schedule_id"] for item in page["items"]]
    while cursor:
        page = h.api.get(f"/schedules?status=paused&limit=2&cursor={cursor}").get_json()
        seen += [item["schedule_id"] for item in page["items"]]
        cursor = page["next_cursor"]
    assert seen == ["e", "d", "c", "b"]
    response = h.api.get("/schedules?label=team:a&label=tier:1")
    assert response.status_code == 200 and response.get_json()["items"] == []


def test_every_parameter_read_once_is_refused_twice_on_every_read(h):
    """Each GET operation's parameters as the OpenAPI document publishes them: one given twice
    (with a value it takes) is 422 naming it unless the document says it repeats (an array)."""
    h.create("s")
    h.post("s", "trigger")
    run_id = h.runs("s")[0].run_id
    document = h.api.get("/openapi.json").get_json()
    checked = set()
    for path, operations in document["paths"].items():
        if "get" not in operations:
            continue
        concrete = path.removeprefix("/api/v1")
        for placeholder, value in {**PARAMS, "{run_id}": run_id}.items():
            concrete = concrete.replace(placeholder, value)
        for parameter in operations["get"]["parameters"]:
            if parameter["in"] != "query":
                continue
            name, schema = parameter["name"], parameter["schema"]
            value = _taken(name, schema)
            response = h.api.get(f"{concrete}?{name}={value}&{name}={value}")
            if schema.get("type") == "array":
                assert response.status_code == 200, (path, name, response.get_json())
            else:
                refused_naming(response, name)
            checked.add((path.removeprefix("/api/v1"), name))
    assert {
        ("/schedules", "status"),
        ("/schedules", "q"),
        ("/schedules", "include_deleted"),
        ("/schedules", "label"),
        ("/schedules/{schedule_id}", "upcoming"),
        ("/schedules/{schedule_id}/occurrences", "limit"),
        ("/runs", "status"),
        ("/runs", "workflow"),
        ("/runs", "label"),
        ("/runs/{run_id}/history", "after_sequence"),
        ("/tasks", "status"),
        ("/incidents", "status"),
        ("/activations", "status"),
        ("/workflows/{name}", "version"),
        ("/namespaces", "cursor"),
    } <= checked


def _taken(name: str, schema: dict[str, Any]) -> str:
    """A value the parameter takes, given once."""
    if "enum" in schema:
        return str(schema["enum"][0])
    if "pattern" in schema:
        return str(schema["pattern"].split("(?:", 2)[2].split(")")[0].split("|")[0])
    if schema.get("type") == "boolean":
        return "true"
    if schema.get("type") == "integer":
        return str(schema["minimum"] if name != "version" else 1)
    if schema.get("type") == "array":
        return "team:a"
    return "x"
