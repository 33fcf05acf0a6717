"""Real success responses match the schemas the OpenAPI document states for them."""

from __future__ import annotations

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
    for method, template, body, params in calls:
        path = template.format(**params)
        kwargs = {"json": body} if body is not None else {}
        response = admin_api.request(method.upper(), path, **kwargs)
        assert response.status_code < 300, (method, path, response.get_json())
        documented = document["paths"]["/api/v1" + template][method]["responses"]
        schema = documented[str(response.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(response.get_json(), schema)
