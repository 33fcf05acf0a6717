"""Workflows and activations over the API: deploy, validation naming the step, grants, pages."""

from __future__ import annotations

import pytest

STEPS = [
    {
        "id": "fetch",
        "type": "action",
        "action": "echo",
        "args": {"x": 1},
        "retry": {"max_attempts": 3},
    },
    {"id": "cool-down", "type": "wait", "duration": "PT5M"},
    {
        "id": "approval",
        "type": "signal",
        "signal": "approve",
        "timeout_seconds": 86400,
        "on_timeout": "fail",
    },
    {
        "id": "review",
        "type": "task",
        "title": "Check totals",
        "role": "operator",
        "timeout_seconds": 3600,
        "on_timeout": "continue",
    },
]
DEFINITION = {
    "name": "invoice-sync",
    "input_schema": {"type": "object"},
    "timeout_seconds": 3600,
    "steps": STEPS,
}


def test_deploy_creates_immutable_versions(admin_api):
    first = admin_api.post("/workflows", json=DEFINITION)
    assert first.status_code == 201
    body = first.get_json()
    assert set(body) == {"name", "version", "definition", "created_at"}
    assert body["name"] == "invoice-sync" and body["version"] == 1
    assert body["definition"] == DEFINITION and body["created_at"] == "2026-01-05T12:00:00Z"
    changed = {**DEFINITION, "timeout_seconds": 60}
    second = admin_api.post("/workflows", json=changed).get_json()
    assert second["version"] == 2
    latest = admin_api.get("/workflows/invoice-sync").get_json()
    assert latest["version"] == 2 and latest["definition"]["timeout_seconds"] == 60
    assert [v["version"] for v in latest["versions"]] == [1, 2]
    old = admin_api.get("/workflows/invoice-sync?version=1").get_json()
    assert old["definition"] == DEFINITION
    assert admin_api.get("/workflows/invoice-sync?version=9").status_code == 404
    # Version numbers start at 1: 0 is a bad query value, not a missing version.
    zero = admin_api.get("/workflows/invoice-sync?version=0")
    assert zero.status_code == 422
    assert zero.get_json()["error"]["details"]["errors"][0]["loc"] == ["query", "version"]
    assert admin_api.get("/workflows/nope").status_code == 404


@pytest.mark.parametrize(
    ("steps", "loc", "step"),
    [
        (
            [
                {"id": "a", "type": "action", "action": "noop"},
                {"id": "a", "type": "wait", "duration": "PT1M"},
            ],
            ["steps", 1, "id"],
            "a",
        ),
        ([{"id": "a", "type": "teleport"}], ["steps", 0, "type"], "a"),
        ([{"id": "a", "type": "action", "action": "launch-missiles"}], ["steps", 0, "action"], "a"),
        ([{"id": "cool", "type": "wait", "duration": "P1M"}], ["steps", 0, "duration"], "cool"),
        (
            [{"id": "cool", "type": "wait", "duration": "5 minutes"}],
            ["steps", 0, "duration"],
            "cool",
        ),
        (
            [{"id": "s", "type": "signal", "signal": "go", "on_timeout": "shrug"}],
            ["steps", 0, "on_timeout"],
            "s",
        ),
        (
            [{"id": "s", "type": "signal", "signal": "go", "timeout_seconds": 0}],
            ["steps", 0, "timeout_seconds"],
            "s",
        ),
        ([{"id": "t", "type": "task", "title": "x", "role": "king"}], ["steps", 0, "role"], "t"),
        (
            [{"id": "a", "type": "action", "action": "noop", "retry": {"max_attempts": 0}}],
            ["steps", 0, "retry", "max_attempts"],
            "a",
        ),
        (
            [{"id": "a", "type": "action", "action": "noop", "duration": "PT1M"}],
            ["steps", 0, "duration"],
            "a",
        ),
    ],
)
def test_invalid_definitions_are_refused_naming_the_step_and_nothing_is_written(
    admin_api, steps, loc, step
):
    response = admin_api.post("/workflows", json={"name": "bad", "steps": steps})
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION"
    assert error["details"]["errors"][0]["loc"] == loc
    assert error["details"]["step"] == step
    assert f"step {step!r}" in error["message"]
    assert admin_api.get("/workflows").get_json()["items"] == []


@pytest.mark.parametrize(
    ("definition", "loc"),
    [
        (
            {"name": "x", "steps": [], "input_schema": {"type": "nonsense"}},
            ["input_schema", "type"],
        ),
        ({"name": "x", "steps": []}, ["steps"]),
        (
            {"name": "bad name!", "steps": [{"id": "a", "type": "action", "action": "noop"}]},
            ["name"],
        ),
        (
            {
                "name": "x",
                "steps": [{"id": "a", "type": "action", "action": "noop"}],
                "owner": "me",
            },
            ["owner"],
        ),
        (
            {
                "name": "x",
                "steps": [{"id": "a", "type": "action", "action": "noop"}],
                "timeout_seconds": "soon",
            },
            ["timeout_seconds"],
        ),
    ],
)
def test_invalid_workflow_fields_are_refused(admin_api, definition, loc):
    response = admin_api.post("/workflows", json=definition)
    assert response.status_code == 422
    assert response.get_json()["error"]["details"]["errors"][0]["loc"] == loc


def test_an_input_schema_is_an_object_or_a_boolean_as_published(admin_api, client):
    schemas = client.get("/api/v1/openapi.json").get_json()["components"]["schemas"]
    published = schemas["DefinitionIn"]["properties"]["input_schema"]["anyOf"]
    assert [kind["type"] for kind in published] == ["object", "boolean"]
    steps = [{"id": "a", "type": "action", "action": "noop"}]
    for schema in (True, False, {"type": "object"}):
        deployed = admin_api.post(
            "/workflows", json={"name": "w", "input_schema": schema, "steps": steps}
        )
        assert deployed.status_code == 201, deployed.get_json()
        assert deployed.get_json()["definition"]["input_schema"] == schema
    refused = admin_api.post("/workflows", json={"name": "w", "input_schema": [], "steps": steps})
    assert refused.status_code == 422
    error = refused.get_json()["error"]["details"]["errors"][0]
    assert error["loc"] == ["input_schema"], error


def test_deploy_needs_workflow_deploy_and_reading_needs_run_read(admin_api, api_for):
    operator = api_for("op", "operator")
    response = operator.post("/workflows", json=DEFINITION)
    assert response.status_code == 403
    assert response.get_json()["error"]["details"]["grant"] == "workflow.deploy"
    deployer = api_for("dep", "deployer")
    assert deployer.post("/workflows", json=DEFINITION).status_code == 201
    viewer = api_for("view", "viewer")
    assert viewer.get("/workflows/invoice-sync").status_code == 200
    assert viewer.post("/activations", json={"workflow": "invoice-sync"}).status_code == 403
    outsider = api_for("out", None)
    assert outsider.get("/workflows").status_code == 404


def test_activations_are_ready_then_retired(admin_api):
    admin_api.post("/workflows", json=DEFINITION)
    admin_api.post("/workflows", json={**DEFINITION, "timeout_seconds": 60})
    response = admin_api.post("/activations", json={"workflow": "invoice-sync"})
    assert response.status_code == 201
    newest = response.get_json()
    assert {k: newest[k] for k in ("workflow", "version", "status", "created_at")} == {
        "workflow": "invoice-sync",
        "version": 2,
        "status": "ready",
        "created_at": "2026-01-05T12:00:00Z",
    }
    pinned = admin_api.post("/activations", json={"workflow": "invoice-sync", "version": 1})
    assert pinned.get_json()["version"] == 1
    assert admin_api.post("/activations", json={"workflow": "nope"}).status_code == 404
    assert (
        admin_api.post("/activations", json={"workflow": "invoice-sync", "version": 7}).status_code
        == 404
    )
    retired = admin_api.post(f"/activations/{newest['id']}/retire")
    assert retired.status_code == 200 and retired.get_json()["status"] == "retired"
    assert admin_api.post(f"/activations/{newest['id']}/retire").status_code == 200
    assert admin_api.post("/activations/unknown/retire").status_code == 404
    ready = admin_api.get("/activations?status=ready").get_json()["items"]
    assert [a["id"] for a in ready] == [pinned.get_json()["id"]]
    assert len(admin_api.get("/activations?workflow=invoice-sync").get_json()["items"]) == 2


def test_a_retire_refuses_a_body_it_cannot_read_and_retires_nothing(admin_api):
    """Retiring takes no fields: its body is read and refused as any other operation's."""
    admin_api.post("/workflows", json=DEFINITION)
    activation = admin_api.post("/activations", json={"workflow": "invoice-sync"}).get_json()
    path = f"/activations/{activation['id']}/retire"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    as_json = {"Content-Type": "application/json"}
    refusals = [
        (admin_api.post(path, data="reason=x", headers=form), 400, "BAD_REQUEST"),
        (admin_api.post(path, data="garbage{", headers=as_json), 400, "BAD_REQUEST"),
        (admin_api.post(path, json={"reason": "old"}), 422, "VALIDATION"),
        (admin_api.post(path, data="x" * (1024 * 1024 + 1), headers=as_json), 413, None),
        # The body is checked before the activation is looked up.
        (admin_api.post("/activations/unknown/retire", json=[1]), 422, "VALIDATION"),
    ]
    for response, status, code in refusals:
        assert response.status_code == status, response.get_json()
        assert code is None or response.get_json()["error"]["code"] == code
    assert admin_api.get("/activations").get_json()["items"][0]["status"] == "ready"
    for empty in ({}, None):
        kwargs = {"json": empty} if empty is not None else {}
        assert admin_api.post(path, **kwargs).status_code == 200
    assert admin_api.get("/activations").get_json()["items"][0]["status"] == "retired"


def test_workflow_and_activation_lists_are_keyset_pages(admin_api):
    for name in ("c", "a", "b"):
        admin_api.post("/workflows", json={**DEFINITION, "name": name})
        admin_api.post("/activations", json={"workflow": name})
    first = admin_api.get("/workflows?limit=2").get_json()
    assert [w["name"] for w in first["items"]] == ["a", "b"]
    second = admin_api.get(f"/workflows?limit=2&cursor={first['next_cursor']}").get_json()
    assert [w["name"] for w in second["items"]] == ["c"] and second["next_cursor"] is None
    page = admin_api.get("/activations?limit=2").get_json()
    rest = admin_api.get(f"/activations?limit=2&cursor={page['next_cursor']}").get_json()
    names = [a["workflow"] for a in page["items"] + rest["items"]]
    assert sorted(names) == ["a", "b", "c"]
    foreign = admin_api.get(f"/activations?cursor={first['next_cursor']}")
    assert foreign.status_code == 400
    assert foreign.get_json()["error"]["code"] == "INVALID_CURSOR"


def test_namespaces_keep_workflows_apart(admin_api):
    admin_api.post("/namespaces", json={"name": "other"})
    admin_api.post("/workflows", json=DEFINITION)
    assert admin_api.get("/namespaces/other/workflows/invoice-sync").status_code == 404
    response = admin_api.post("/workflows", json=DEFINITION, headers={"X-Namespace": "other"})
    assert response.status_code == 201 and response.get_json()["version"] == 1
    assert admin_api.get("/namespaces/other/workflows").get_json()["items"][0]["version"] == 1


def test_the_activation_made_last_is_the_newest_even_on_a_frozen_clock(admin_api):
    # The manual clock does not move between these calls: every activation is made at one
    # instant, and the one made last must still be the one runs and schedules follow.
    admin_api.post("/workflows", json=DEFINITION)
    admin_api.post("/workflows", json={**DEFINITION, "timeout_seconds": 60})
    made = []
    for version in (2, 1, 2, 1, 1, 2, 1, 2):
        response = admin_api.post(
            "/activations", json={"workflow": "invoice-sync", "version": version}
        )
        assert response.status_code == 201
        made.append(response.get_json()["id"])
        run = admin_api.post("/runs", json={"workflow": "invoice-sync"}).get_json()
        assert (run["activation_id"], run["version"]) == (made[-1], version)
    listed = admin_api.get("/activations?workflow=invoice-sync").get_json()["items"]
    assert [a["id"] for a in listed] == made[::-1]
