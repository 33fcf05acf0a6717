"""A mistake inside a parallel step's branches names a step in `details.step`: the offending
step when it has an id, else the innermost parallel step holding it."""

from __future__ import annotations

from typing import Any

import pytest


def _parallel(step_id: str, steps: Any) -> dict[str, Any]:
    return {"id": step_id, "type": "parallel", "branches": [{"id": "b", "steps": steps}]}


def _branch_without_steps(step_id: str) -> dict[str, Any]:
    return {"id": step_id, "type": "parallel", "branches": [{"id": "b"}]}


IN_BRANCH = ["steps", 0, "branches", 0, "steps"]
NESTED = [*IN_BRANCH, 0, "branches", 0, "steps"]


@pytest.mark.parametrize(
    ("step", "loc", "named"),
    [
        (_parallel("p", []), IN_BRANCH, "p"),
        (_parallel("p", "x"), IN_BRANCH, "p"),
        (_branch_without_steps("p"), IN_BRANCH, "p"),
        (_parallel("p", [5]), [*IN_BRANCH, 0], "p"),
        (_parallel("p", [{"id": "bad id", "type": "wait"}]), [*IN_BRANCH, 0, "id"], "p"),
        (_parallel("p", [{"type": "wait", "duration": "PT1M"}]), [*IN_BRANCH, 0, "id"], "p"),
        (_parallel("p", [_parallel("q", [])]), NESTED, "q"),
        (_parallel("p", [_parallel("q", {"a": 1})]), NESTED, "q"),
        (_parallel("p", [_parallel("q", [None])]), [*NESTED, 0], "q"),
        # A step with an id of its own is the one named, however deep it is.
        (
            _parallel("p", [_parallel("q", [{"id": "w", "type": "wait", "duration": "x"}])]),
            [*NESTED, 0, "duration"],
            "w",
        ),
    ],
)
def test_a_mistake_in_a_branch_names_the_innermost_step_with_an_id(admin_api, step, loc, named):
    response = admin_api.post("/workflows", json={"name": "v1", "steps": [step]})
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION"
    assert error["details"]["errors"][0]["loc"] == loc
    assert error["details"]["step"] == named
    assert error["message"].startswith(f"step {named!r}: ")
    assert admin_api.get("/workflows/v1").status_code == 404


def test_a_mistake_in_a_top_level_step_without_an_id_names_no_step(admin_api):
    response = admin_api.post("/workflows", json={"name": "v1", "steps": [{"type": "wait"}]})
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["details"]["errors"][0]["loc"] == ["steps", 0, "id"]
    assert "step" not in error["details"]


@pytest.mark.parametrize(
    ("step", "loc"),
    [
        ({"id": "a", "type": {}}, ["steps", 0, "type"]),
        ({"id": "a", "type": ["action"]}, ["steps", 0, "type"]),
        ({"id": "a", "type": "task", "title": "t", "role": ["viewer"]}, ["steps", 0, "role"]),
        ({"id": "a", "type": "task", "title": "t", "role": {}}, ["steps", 0, "role"]),
        (_parallel("p", [{"id": "w", "type": {"x": 1}}]), [*IN_BRANCH, 0, "type"]),
    ],
)
def test_a_type_or_role_that_is_not_a_string_is_refused_naming_it(admin_api, step, loc):
    """An object or a list where a name belongs was a 500 (it cannot be looked up by name)."""
    response = admin_api.post("/workflows", json={"name": "v1", "steps": [step]})
    assert response.status_code == 422, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "VALIDATION"
    assert error["details"]["errors"][0]["loc"] == loc
    assert admin_api.get("/workflows/v1").status_code == 404


@pytest.mark.parametrize(
    ("step", "loc", "words"),
    [
        (
            {
                "id": "p",
                "type": "parallel",
                "branches": [{"id": "b", "steps": [{"id": "x", "type": "wait"}], "limit": 1}],
            },
            ["steps", 0, "branches", 0, "limit"],
            "unknown field for a branch",
        ),
        (
            {"id": "a", "type": "action", "action": "noop", "retry": {"backof_seconds": 5}},
            ["steps", 0, "retry", "backof_seconds"],
            "unknown field for a retry policy",
        ),
    ],
)
def test_an_unknown_key_in_a_branch_or_a_retry_policy_is_named(admin_api, step, loc, words):
    """As a step's own unknown fields are: the location ends at the key (a typo such as
    `backof_seconds` was answered with the parent object's shape, the key unnamed)."""
    response = admin_api.post("/workflows", json={"name": "v1", "steps": [step]})
    assert response.status_code == 422
    first = response.get_json()["error"]["details"]["errors"][0]
    assert first["loc"] == loc and words in first["msg"]
    assert admin_api.get("/workflows/v1").status_code == 404
