"""Real success responses match the schemas the OpenAPI document states for them."""

from __future__ import annotations

import re

import jsonschema

from tests.security.conftest import deploy

TASK_STEPS = [
    {"id": "review", "type": "task", "title": "Check", "role": "operator"},
    {"id": "go", "type": "signal", "signal": "go"},
]


def test_documented_success_schemas_match_real_responses(client, admin_api):
    document = client.get("/api/v1/openapi.json").get_json()
    deploy(admin_api, "wf", steps=TASK_STEPS)
    activation = admin_api.get("/activations").get_json()["items"][0]["id"]
    calls = [
        ("get", "/health", None, {}),
        ("get", "/namespaces", None, {}),
        ("post", "/namespaces", {"name": "n2"}, {}),
        ("post", "/calendar/preview", {"spec": {"cron": "* * * * *"}, "count": 2}, {}),
        ("get", "/workflows", None, {}),
        ("get", "/workflows/{name}", None, {"name": "wf"}),
        ("get", "/activations", None, {}),
        (
            "post",
            "/schedules",
            {"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "wf"}},
            {},
        ),
        ("get", "/schedules", None, {}),
        ("get", "/schedules/{schedule_id}", None, {"schedule_id": "s"}),
        ("post", "/schedules/{schedule_id}/trigger", {}, {"schedule_id": "s"}),
        (
            "post",
            "/schedules/{schedule_id}/backfill",
            {"from": "2026-01-05T11:00:00Z", "to": "2026-01-05T11:10:00Z"},
            {"schedule_id": "s"},
        ),
        ("get", "/schedules/{schedule_id}/occurrences", None, {"schedule_id": "s"}),
        ("get", "/schedules/{schedule_id}/history", None, {"schedule_id": "s"}),
        ("post", "/runs", {"workflow": "wf", "run_id": "r1"}, {}),
        ("post", "/admin/tick", {"work": True}, {}),
        ("get", "/runs", None, {}),
        ("get", "/runs/{run_id}", None, {"run_id": "r1"}),
        ("get", "/runs/{run_id}/history", None, {"run_id": "r1"}),
        ("get", "/runs/{run_id}/replay", None, {"run_id": "r1"}),
        ("get", "/tasks", None, {}),
        ("post", "/runs/{run_id}/signals/{name}", {}, {"run_id": "r1", "name": "go"}),
        ("post", "/runs/{run_id}/cancel", {}, {"run_id": "r1"}),
        ("post", "/admin/clock", {"now": "2026-01-05T12:01:00Z"}, {}),
        ("post", "/activations/{activation_id}/retire", {}, {"activation_id": activation}),
    ]
    missing_all = []
    for method, template, body, params in calls:
        path = template.format(**params)
        kwargs = {"json": body} if body is not None else {}
        response = admin_api.request(method.upper(), path, **kwargs)
        assert response.status_code < 300, (method, path, response.get_json())
        documented = document["paths"]["/api/v1" + template][method]["responses"]
        schema = documented[str(response.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(response.get_json(), schema)
        # And every field the answer holds is documented (the schemas allow more keys).
        missing_all.extend((method, path, m) for m in undeclared(response.get_json(), schema))
    assert missing_all == [], "\n".join(map(str, missing_all))


def undeclared(value, schema, where: str = "") -> list[str]:
    """The places in `value` holding a key that `schema` (an object's `properties`, an
    array's `items`, walked down) does not name."""
    if isinstance(value, dict) and "properties" in schema:
        found = [f"{where}.{key}" for key in value if key not in schema["properties"]]
        for key, inner in value.items():
            if key in schema["properties"]:
                found += undeclared(inner, schema["properties"][key], f"{where}.{key}")
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [miss for item in value for miss in undeclared(item, schema["items"], where + "[]")]
    return []


def _documented(document, method: str, template: str, status: int):
    answers = document["paths"]["/api/v1" + template][method]["responses"]
    assert str(status) in answers, (method, template, status, sorted(answers))
    return answers[str(status)]["content"]["application/json"]["schema"]


def test_every_success_a_client_meets_is_documented_with_its_schema(client, admin_api):
    """Answers beside an operation's main status (a replaced schedule's 200, a repeated run's
    200), the caller, and incidents: each status is in the document and its body matches."""
    document = client.get("/api/v1/openapi.json").get_json()
    deploy(admin_api, "wf")
    steps = [{"id": "charge", "type": "action", "action": "fail"}]
    admin_api.post(
        "/workflows", json={"name": "risky", "steps": steps, "on_step_failure": "incident"}
    )
    admin_api.post("/activations", json={"workflow": "risky"})
    body = {"id": "s", "cron": "*/5 * * * *", "action": {"workflow": "wf"}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    replaced = admin_api.post("/schedules", json=body | {"notes": "x"}, headers={"If-Match": '"1"'})
    started = [admin_api.post("/runs", json={"workflow": "wf", "run_id": "r1"}) for _ in "12"]
    admin_api.post("/runs", json={"workflow": "risky", "run_id": "r2"})
    admin_api.post("/admin/tick", json={"work": True})
    [incident] = admin_api.get("/incidents").get_json()["items"]
    resolved = admin_api.post(
        f"/runs/r2/incidents/{incident['id']}/resolve", json={"action": "skip"}
    )
    answers = [
        ("post", "/schedules", replaced, 200),
        ("post", "/runs", started[0], 201),
        ("post", "/runs", started[1], 200),
        ("get", "/me", admin_api.get("/me"), 200),
        ("get", "/incidents", admin_api.get("/incidents"), 200),
        ("get", "/runs/{run_id}/incidents", admin_api.get("/runs/r2/incidents"), 200),
        ("post", "/runs/{run_id}/incidents/{incident_id}/resolve", resolved, 200),
    ]
    for method, template, response, status in answers:
        assert response.status_code == status, (template, response.get_json())
        schema = _documented(document, method, template, status)
        assert schema, (method, template)  # a schema that states something
        jsonschema.validate(response.get_json(), schema)
        assert undeclared(response.get_json(), schema) == [], (method, template)


def test_the_document_says_which_bodies_may_be_left_out_and_which_operations_read_if_match(
    client,
):
    paths = client.get("/api/v1/openapi.json").get_json()["paths"]
    # Every field optional: a body left out reads as `{}`, so it is not required.
    for path in ("/schedules/{schedule_id}/pause", "/runs/{run_id}/cancel"):
        assert paths["/api/v1" + path]["post"]["requestBody"]["required"] is False
    # A field that must be given: so must the body.
    assert paths["/api/v1/namespaces"]["post"]["requestBody"]["required"] is True

    def headers(method: str, path: str) -> list[str]:
        params = paths["/api/v1" + path][method]["parameters"]
        return [p["name"] for p in params if p["in"] == "header"]

    for method, path in [
        ("post", "/schedules"),
        ("patch", "/schedules/{schedule_id}"),
        ("delete", "/schedules/{schedule_id}"),
        ("post", "/schedules/{schedule_id}/pause"),
        ("post", "/schedules/{schedule_id}/resume"),
        ("post", "/namespaces/{ns}/schedules/{schedule_id}/delete"),
    ]:
        assert "If-Match" in headers(method, path), (method, path)
    assert "If-Match" not in headers("post", "/schedules/{schedule_id}/trigger")
    [if_match] = [
        p for p in paths["/api/v1/schedules/{schedule_id}"]["patch"]["parameters"]
        if p["name"] == "If-Match"
    ]  # fmt: skip
    pattern = if_match["schema"]["pattern"]
    for taken in ("3", '"3"', 'W/"3"', " 12 "):
        assert re.fullmatch(pattern, taken), taken
    for refused in ("*", "abc", "W/3", "\u0661"):
        assert not re.fullmatch(pattern, refused), refused
