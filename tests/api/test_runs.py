"""Runs, signals, cancel/terminate and tasks over the API: shapes, bad input, grants, pages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.runs_scenario import assert_replay_agrees

RUN_KEYS = {
    "run_id",
    "uid",
    "namespace",
    "workflow",
    "version",
    "activation_id",
    "schedule_id",
    "status",
    "input",
    "output",
    "error",
    "current_step",
    "queue",
    "labels",
    "memo",
    "search_attributes",
    "created_at",
    "started_at",
    "finished_at",
}


@pytest.fixture(autouse=True)
def replay_every_run(app) -> Iterator[None]:
    yield
    assert_replay_agrees(app)


@pytest.fixture
def deployed(admin_api):
    admin_api.post(
        "/workflows",
        json={
            "name": "greet",
            "input_schema": {
                "type": "object",
                "required": ["who"],
                "properties": {"who": {"type": "string"}},
            },
            "steps": [
                {"id": "hello", "type": "action", "action": "echo"},
                {"id": "approval", "type": "signal", "signal": "approve"},
            ],
        },
    )
    return admin_api.post("/activations", json={"workflow": "greet"}).get_json()


def test_start_run_answers_the_run_shape_and_is_idempotent_on_run_id(admin_api, deployed):
    response = admin_api.post(
        "/runs",
        json={
            "workflow": "greet",
            "input": {"who": "ada"},
            "run_id": "greet-1",
            "labels": {"team": "x"},
            "memo": {"ticket": 7},
            "search_attributes": {"tenant_id": "42"},
        },
    )
    assert response.status_code == 201
    run = response.get_json()
    assert set(run) == RUN_KEYS
    assert run["run_id"] == "greet-1" and run["status"] == "pending"
    assert run["workflow"] == "greet" and run["version"] == 1
    assert run["activation_id"] == deployed["id"] and run["namespace"] == "default"
    assert run["input"] == {"who": "ada"} and run["created_at"] == "2026-01-05T12:00:00Z"
    # What the run was started with, shown back (memo and search attributes were not).
    assert run["labels"] == {"team": "x"} and run["memo"] == {"ticket": 7}
    assert run["search_attributes"] == {"tenant_id": "42"}
    again = admin_api.post(
        "/runs", json={"workflow": "greet", "input": {"who": "bob"}, "run_id": "greet-1"}
    )
    assert again.status_code == 200 and again.get_json()["uid"] == run["uid"]
    assert again.get_json()["input"] == {"who": "ada"}
    pinned = admin_api.post("/runs", json={"activation_id": deployed["id"], "input": {"who": "cy"}})
    assert pinned.status_code == 201 and pinned.get_json()["run_id"].startswith("run-")
    assert len(admin_api.get("/runs").get_json()["items"]) == 2


def test_a_run_id_in_use_by_another_workflow_is_refused_not_answered_with_its_run(
    admin_api, deployed
):
    """The same run id for another workflow answered 200 with the first workflow's run, as if
    the caller's own had started."""
    admin_api.post(
        "/workflows",
        json={"name": "other", "steps": [{"id": "a", "type": "action", "action": "noop"}]},
    )
    other = admin_api.post("/activations", json={"workflow": "other"}).get_json()
    first = admin_api.post(
        "/runs", json={"workflow": "greet", "input": {"who": "a"}, "run_id": "x-1"}
    )
    assert first.status_code == 201
    for body in ({"workflow": "other"}, {"activation_id": other["id"]}):
        refused = admin_api.post("/runs", json={**body, "run_id": "x-1"})
        assert refused.status_code == 409, refused.get_json()
        error = refused.get_json()["error"]
        assert error["code"] == "CONFLICT" and error["details"]["run_id"] == "x-1"
        assert "another workflow" in error["message"]
    # A retry of the same request, by workflow or by its activation, is still the same run.
    for body in ({"workflow": "greet"}, {"activation_id": deployed["id"]}):
        again = admin_api.post("/runs", json={**body, "input": {"who": "a"}, "run_id": "x-1"})
        assert again.status_code == 200 and again.get_json()["uid"] == first.get_json()["uid"]
    assert [r["run_id"] for r in admin_api.get("/runs").get_json()["items"]] == ["x-1"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"workflow": "greet", "input": {"who": 5}}, 422, "INPUT_SCHEMA"),
        ({"workflow": "greet", "input": {}}, 422, "INPUT_SCHEMA"),
        ({"workflow": "nope", "input": {"who": "x"}}, 404, "NOT_FOUND"),
        ({"activation_id": "nope", "input": {"who": "x"}}, 404, "NOT_FOUND"),
        ({"input": {"who": "x"}}, 422, "VALIDATION"),
        ({"workflow": "greet", "activation_id": "x", "input": {"who": "x"}}, 422, "VALIDATION"),
        ({"workflow": "greet", "input": {"who": "x"}, "run_id": "has/slash"}, 422, "VALIDATION"),
        ({"workflow": "greet", "input": {"who": "x"}, "surprise": 1}, 422, "VALIDATION"),
    ],
)
def test_bad_run_requests_are_refused_and_nothing_is_written(
    admin_api, deployed, body, status, code
):
    response = admin_api.post("/runs", json=body)
    assert response.status_code == status, response.get_json()
    assert response.get_json()["error"]["code"] == code
    assert admin_api.get("/runs").get_json()["items"] == []


def test_retired_activations_refuse_new_runs(admin_api, deployed):
    admin_api.post(f"/activations/{deployed['id']}/retire")
    pinned = admin_api.post("/runs", json={"activation_id": deployed["id"], "input": {"who": "x"}})
    assert pinned.status_code == 409 and "retired" in pinned.get_json()["error"]["message"]
    latest = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x"}})
    assert latest.status_code == 409


def test_signal_and_cancel_on_a_finished_run_answer_409_naming_the_status(admin_api, deployed):
    run_id = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x"}}).get_json()[
        "run_id"
    ]
    admin_api.post(f"/runs/{run_id}/terminate", json={"reason": "test"})
    for path in (
        f"/runs/{run_id}/signals/approve",
        f"/runs/{run_id}/cancel",
        f"/runs/{run_id}/terminate",
    ):
        response = admin_api.post(path, json={})
        assert response.status_code == 409
        error = response.get_json()["error"]
        assert error["details"]["status"] == "terminated" and "terminated" in error["message"]
    assert admin_api.post("/runs/missing/signals/approve", json={}).status_code == 404


def test_payloads_over_the_limits_answer_413(admin_api, deployed):
    run_id = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x"}}).get_json()[
        "run_id"
    ]
    big = "x" * (300 * 1024)
    response = admin_api.post(f"/runs/{run_id}/signals/approve", json={"payload": big})
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    response = admin_api.post(
        "/runs", json={"workflow": "greet", "input": {"who": "x", "blob": big}}
    )
    assert response.status_code == 413
    huge = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x" * 2**21}})
    assert huge.status_code == 413
    history = admin_api.get(f"/runs/{run_id}/history").get_json()["items"]
    assert [e["event_type"] for e in history] == ["run_started"]
    assert len(admin_api.get("/runs").get_json()["items"]) == 1


def test_grants_viewer_reads_operator_manages(admin_api, api_for, deployed):
    viewer = api_for("viewer", "viewer")
    operator = api_for("op", "operator")
    refused = viewer.post("/runs", json={"workflow": "greet", "input": {"who": "x"}})
    assert refused.status_code == 403
    assert refused.get_json()["error"]["details"]["grant"] == "run.start"
    run_id = operator.post("/runs", json={"workflow": "greet", "input": {"who": "x"}}).get_json()[
        "run_id"
    ]
    assert viewer.get(f"/runs/{run_id}").status_code == 200
    assert viewer.get(f"/runs/{run_id}/history").status_code == 200
    assert viewer.get(f"/runs/{run_id}/replay").status_code == 200
    for path in (
        f"/runs/{run_id}/signals/approve",
        f"/runs/{run_id}/cancel",
        f"/runs/{run_id}/terminate",
    ):
        response = viewer.post(path, json={})
        assert response.status_code == 403
        assert response.get_json()["error"]["details"]["grant"] == "run.manage"
    assert operator.post(f"/runs/{run_id}/signals/approve", json={}).status_code == 202
    assert operator.post(f"/runs/{run_id}/cancel", json={}).status_code == 200


def test_task_is_completed_by_an_operator_and_refused_for_a_viewer(admin_api, api_for):
    admin_api.post(
        "/workflows",
        json={
            "name": "review",
            "steps": [{"id": "check", "type": "task", "title": "Check totals", "role": "operator"}],
        },
    )
    admin_api.post("/activations", json={"workflow": "review"})
    run_id = admin_api.post("/runs", json={"workflow": "review"}).get_json()["run_id"]
    admin_api.post("/admin/tick", json={"work": True})
    viewer = api_for("viewer", "viewer")
    inbox = viewer.get("/tasks?status=open").get_json()["items"]
    assert [t["title"] for t in inbox] == ["Check totals"]
    task_id = inbox[0]["id"]
    refused = viewer.post(f"/tasks/{task_id}/complete", json={"output": {"ok": True}})
    assert refused.status_code == 403
    assert refused.get_json()["error"]["details"]["grant"] == "run.manage"
    assert viewer.get("/tasks?status=open").get_json()["items"][0]["status"] == "open"
    operator = api_for("op", "operator")
    done = operator.post(f"/tasks/{task_id}/complete", json={"output": {"ok": True}})
    assert done.status_code == 200
    assert done.get_json()["completed_by"] == "op" and done.get_json()["output"] == {"ok": True}
    run = admin_api.get(f"/runs/{run_id}").get_json()
    assert run["status"] == "completed" and run["output"] == {"ok": True}
    assert admin_api.post("/tasks/nope/complete", json={}).status_code == 404
    assert viewer.get("/tasks?status=bogus").status_code == 422


def test_a_task_for_a_higher_role_needs_that_roles_grants(admin_api, api_for):
    admin_api.post(
        "/workflows",
        json={
            "name": "deploy-check",
            "steps": [{"id": "check", "type": "task", "title": "Sign off", "role": "deployer"}],
        },
    )
    admin_api.post("/activations", json={"workflow": "deploy-check"})
    admin_api.post("/runs", json={"workflow": "deploy-check"})
    admin_api.post("/admin/tick", json={"work": True})
    task_id = admin_api.get("/tasks").get_json()["items"][0]["id"]
    refused = api_for("op", "operator").post(f"/tasks/{task_id}/complete", json={})
    assert refused.status_code == 403
    assert refused.get_json()["error"]["details"]["grant"] == "workflow.deploy"
    assert api_for("dep", "deployer").post(f"/tasks/{task_id}/complete", json={}).status_code == 200


def test_runs_list_filters_and_pages(admin_api, deployed):
    for index in range(5):
        admin_api.post(
            "/runs",
            json={
                "workflow": "greet",
                "input": {"who": str(index)},
                "run_id": f"r{index}",
                "labels": {"team": "a" if index % 2 else "b"},
                "search_attributes": {"tenant_id": str(index)},
            },
        )
    admin_api.post("/runs/r0/terminate", json={})
    ids = [r["run_id"] for r in admin_api.get("/runs").get_json()["items"]]
    assert sorted(ids) == ["r0", "r1", "r2", "r3", "r4"]
    page = admin_api.get("/runs?limit=2").get_json()
    seen = [r["run_id"] for r in page["items"]]
    while page["next_cursor"]:
        page = admin_api.get(f"/runs?limit=2&cursor={page['next_cursor']}").get_json()
        seen += [r["run_id"] for r in page["items"]]
    assert seen == ids and len(set(seen)) == 5
    team_a = admin_api.get("/runs?label=team:a").get_json()["items"]
    assert sorted(r["run_id"] for r in team_a) == ["r1", "r3"]
    tenant = admin_api.get("/runs?search_attribute=tenant_id:4").get_json()["items"]
    assert [r["run_id"] for r in tenant] == ["r4"]
    terminated = admin_api.get("/runs?status=terminated").get_json()["items"]
    assert [r["run_id"] for r in terminated] == ["r0"]
    assert len(admin_api.get("/runs?status=pending,terminated").get_json()["items"]) == 5
    assert admin_api.get("/runs?status=sleeping").status_code == 422
    assert admin_api.get("/runs?label=nocolon").status_code == 422
    assert admin_api.get("/runs?workflow=greet&label=team:b").get_json()["items"][0]["run_id"] in {
        "r0",
        "r2",
        "r4",
    }


def test_a_cursor_is_bound_to_the_filters_that_listed_it(admin_api, deployed):
    for index in range(6):
        labels = {"team": "a" if index % 2 else "b", "tier": "x"}
        admin_api.post(
            "/runs",
            json={
                "workflow": "greet",
                "input": {"who": "w"},
                "run_id": f"r{index}",
                "labels": labels,
            },
        )
    first = admin_api.get("/runs?label=team:a&label=tier:x&limit=1").get_json()
    cursor = first["next_cursor"]
    # The same filters in another order, with another page size: the rest of the same list.
    rest = admin_api.get(f"/runs?limit=5&label=tier:x&cursor={cursor}&label=team:a").get_json()
    listed = [r["run_id"] for r in first["items"] + rest["items"]]
    assert listed == ["r5", "r3", "r1"] and rest["next_cursor"] is None
    for other in (
        "label=team:b&label=tier:x",
        "label=team:a",
        "",
        "label=team:a&label=tier:x&status=pending",
    ):
        refused = admin_api.get(f"/runs?{other}&cursor={cursor}")
        assert refused.status_code == 400, other
        error = refused.get_json()["error"]
        assert error["code"] == "INVALID_CURSOR" and "other filters" in error["message"], other
    unfiltered = admin_api.get("/runs?limit=2").get_json()["next_cursor"]
    assert admin_api.get(f"/runs?limit=2&cursor={unfiltered}").status_code == 200
    refused = admin_api.get(f"/runs?status=pending&cursor={unfiltered}")
    assert refused.status_code == 400 and refused.get_json()["error"]["code"] == "INVALID_CURSOR"
    # One filter spelled otherwise binds alike: a status list in another order, an empty value.
    by_status = admin_api.get("/runs?status=pending,terminated&limit=2").get_json()["next_cursor"]
    for same in ("status=terminated,pending", "status=pending,,terminated"):
        assert admin_api.get(f"/runs?{same}&cursor={by_status}").status_code == 200, same
    assert admin_api.get(f"/runs?limit=2&status=&cursor={unfiltered}").status_code == 200


def test_a_status_given_twice_is_refused_and_a_repeated_label_key_must_match_both(
    admin_api, deployed
):
    for index in range(4):
        admin_api.post(
            "/runs",
            json={
                "workflow": "greet",
                "input": {"who": "w"},
                "run_id": f"r{index}",
                "labels": {"team": "a" if index % 2 else "b"},
                "search_attributes": {"tenant_id": str(index)},
            },
        )
    admin_api.post("/runs/r0/terminate", json={})
    # The second status was dropped: only the terminated run was listed.
    response = admin_api.get("/runs?status=terminated&status=pending")
    assert response.status_code == 422
    errors = response.get_json()["error"]["details"]["errors"]
    assert [error["loc"] for error in errors] == [["query", "status"]]
    assert "comma-separated" in errors[0]["msg"]
    both = admin_api.get("/runs?status=terminated,pending").get_json()["items"]
    assert sorted(run["run_id"] for run in both) == ["r0", "r1", "r2", "r3"]
    # Every label must match, as on the schedules list: one key with two values matches none
    # (the last value alone was filtered on, and a cursor bound to the pair in one order was
    # taken by the other order, which listed the other team).
    for query in (
        "label=team:a&label=team:b&limit=1",
        "label=team:b&label=team:a&limit=1",
        "search_attribute=tenant_id:1&search_attribute=tenant_id:2",
    ):
        page = admin_api.get(f"/runs?{query}").get_json()
        assert page == {"items": [], "next_cursor": None}, query
    same = admin_api.get("/runs?label=team:a&label=team:a").get_json()["items"]
    assert sorted(run["run_id"] for run in same) == ["r1", "r3"]


def test_history_is_paged_by_sequence(admin_api, deployed):
    run_id = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x"}}).get_json()[
        "run_id"
    ]
    admin_api.post("/admin/tick", json={"work": True})
    admin_api.post(f"/runs/{run_id}/signals/approve", json={"payload": 1})
    first = admin_api.get(f"/runs/{run_id}/history?limit=3").get_json()
    events = first["items"]
    assert set(events[0]) == {"id", "sequence", "event_type", "node_id", "payload", "recorded_at"}
    rest = admin_api.get(f"/runs/{run_id}/history?cursor={first['next_cursor']}").get_json()
    events += rest["items"]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert [e["event_type"] for e in events] == [
        "run_started",
        "step_started",
        "step_completed",
        "step_started",
        "signal_received",
        "step_completed",
        "run_completed",
    ]
    assert rest["next_cursor"] is None
    # A reader that saw up to a sequence follows the run from there (the last page has no cursor).
    after = admin_api.get(f"/runs/{run_id}/history?after_sequence=5&limit=1").get_json()
    assert [e["sequence"] for e in after["items"]] == [6] and after["next_cursor"]
    following = admin_api.get(f"/runs/{run_id}/history?cursor={after['next_cursor']}").get_json()
    assert [e["sequence"] for e in following["items"]] == [7]
    assert admin_api.get(f"/runs/{run_id}/history?after_sequence=7").get_json()["items"] == []
    assert [
        e["sequence"]
        for e in admin_api.get(f"/runs/{run_id}/history?after_sequence=0").get_json()["items"]
    ] == list(range(1, 8))
    for bad in ("-1", "x", "1.5"):
        refused = admin_api.get(f"/runs/{run_id}/history?after_sequence={bad}")
        assert refused.status_code == 400, bad
        assert refused.get_json()["error"]["code"] == "INVALID_CURSOR"
    both = admin_api.get(f"/runs/{run_id}/history?after_sequence=1&cursor={first['next_cursor']}")
    assert both.status_code == 400 and both.get_json()["error"]["code"] == "BAD_REQUEST"
    # An empty after_sequence is absent, as every empty query parameter: the cursor alone.
    empty = admin_api.get(f"/runs/{run_id}/history?after_sequence=&cursor={first['next_cursor']}")
    assert empty.status_code == 200 and empty.get_json()["items"] == rest["items"]


def test_runs_belong_to_their_namespace(admin_api, deployed):
    run_id = admin_api.post("/runs", json={"workflow": "greet", "input": {"who": "x"}}).get_json()[
        "run_id"
    ]
    admin_api.post("/namespaces", json={"name": "other"})
    assert admin_api.get(f"/namespaces/other/runs/{run_id}").status_code == 404
    assert admin_api.get(f"/runs/{run_id}", headers={"X-Namespace": "other"}).status_code == 404
    assert admin_api.get(f"/namespaces/default/runs/{run_id}").status_code == 200


def test_namespace_capacity_refuses_new_runs_with_429(admin_api):
    admin_api.post("/namespaces", json={"name": "small", "max_active_runs": 1})
    headers = {"X-Namespace": "small"}
    admin_api.post(
        "/workflows",
        headers=headers,
        json={"name": "w", "steps": [{"id": "s", "type": "signal", "signal": "go"}]},
    )
    admin_api.post("/activations", headers=headers, json={"workflow": "w"})
    assert admin_api.post("/runs", headers=headers, json={"workflow": "w"}).status_code == 201
    refused = admin_api.post("/runs", headers=headers, json={"workflow": "w"})
    assert refused.status_code == 429 and refused.headers["Retry-After"]


def test_search_attribute_keys_are_ones_the_filter_can_name(admin_api, deployed):
    # `?search_attribute=k:v` splits at the first colon: "a:b" was stored and never found.
    for key in ("", "a:b", "a\nb", "L" * 300):
        body = {"workflow": "greet", "input": {"who": "x"}, "search_attributes": {key: "v"}}
        refused = admin_api.post("/runs", json=body)
        assert refused.status_code == 422, key
        (error,) = refused.get_json()["error"]["details"]["errors"]
        assert error["loc"] == ["search_attributes"] and "search attribute key" in error["msg"]
    assert admin_api.get("/runs").get_json()["items"] == []
    body = {"workflow": "greet", "input": {"who": "x"}, "run_id": "r"}
    body["search_attributes"] = {"tenant.id/x": "a:b"}
    assert admin_api.post("/runs", json=body).status_code == 201
    (listed,) = admin_api.get("/runs?search_attribute=tenant.id/x:a:b").get_json()["items"]
    assert listed["run_id"] == "r"


def test_run_labels_follow_the_schedules_rule_and_are_shown(admin_api, deployed):
    # A run's labels are matched by `?label=k:v` as a schedule's are: keys a filter cannot
    # name (empty, a colon, a newline, 300 characters) were stored and could never be found.
    for key in ("", "a:b", "a\nb", "<script>", "k\u0301", "L" * 300):
        body = {"workflow": "greet", "input": {"who": "x"}, "labels": {key: "v"}}
        refused = admin_api.post("/runs", json=body)
        assert refused.status_code == 422, key
        (error,) = refused.get_json()["error"]["details"]["errors"]
        assert error["loc"] == ["labels"] and "label key" in error["msg"]
    too_long = {"workflow": "greet", "input": {"who": "x"}, "labels": {"team": "v" * 257}}
    assert admin_api.post("/runs", json=too_long).status_code == 422
    assert admin_api.get("/runs").get_json()["items"] == []
    body = {"workflow": "greet", "input": {"who": "x"}, "run_id": "r", "labels": {"team/x": "a b"}}
    assert admin_api.post("/runs", json=body).status_code == 201
    assert admin_api.get("/runs/r").get_json()["labels"] == {"team/x": "a b"}
    (listed,) = admin_api.get("/runs?label=team/x:a b").get_json()["items"]
    assert listed["run_id"] == "r" and listed["labels"] == {"team/x": "a b"}


def test_tasks_made_in_one_instant_list_newest_first_in_the_order_they_were_made(admin_api):
    flow = {"name": "ask", "steps": [{"id": "approve", "type": "task", "title": "Approve"}]}
    assert admin_api.post("/workflows", json=flow).status_code == 201
    admin_api.post("/activations", json={"workflow": "ask"})
    for index in range(6):
        admin_api.post("/runs", json={"workflow": "ask", "run_id": f"t{index}"})
    admin_api.post("/admin/tick", json={"work": True})
    listed = admin_api.get("/tasks?status=open").get_json()["items"]
    assert len(listed) == 6 and len({t["created_at"] for t in listed}) == 1
    made = {}
    for task in listed:
        events = admin_api.get(f"/runs/{task['run_id']}/history").get_json()["items"]
        (event,) = [e for e in events if e["event_type"] == "task_created"]
        made[task["id"]] = event["id"]
    assert [t["id"] for t in listed] == sorted(made, key=made.__getitem__, reverse=True)
