"""JSON Schemas of the API's success responses, for the OpenAPI document.

Keyed by method and path without `/api/v1` and without the `/namespaces/{ns}` prefix (both
forms of a namespaced route answer alike). They state the keys clients rely on and their types;
the fuzz test checks every response against them.
"""

from __future__ import annotations

from typing import Any

STRING = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
OBJECT = {"type": "object"}
ANY: dict[str, Any] = {}
TEXT_OR_NULL = {"type": ["string", "null"]}
INT_OR_NULL = {"type": ["integer", "null"]}


def obj(**props: Any) -> dict[str, Any]:
    """An object with exactly these keys required (more keys may follow in later versions)."""
    return {"type": "object", "required": sorted(props), "properties": props}


def also(schema: dict[str, Any], **props: Any) -> dict[str, Any]:
    """`schema` with more properties that are not always present."""
    return {**schema, "properties": {**schema["properties"], **props}}


def page(item: dict[str, Any]) -> dict[str, Any]:
    return obj(items={"type": "array", "items": item}, next_cursor=TEXT_OR_NULL)


RUN = obj(
    run_id=STRING,
    uid=STRING,
    namespace=STRING,
    workflow=STRING,
    version=INT,
    activation_id=STRING,
    schedule_id=TEXT_OR_NULL,
    status=STRING,
    input=ANY,
    output=ANY,
    error=ANY,
    current_step=TEXT_OR_NULL,
    queue=TEXT_OR_NULL,
    labels=OBJECT,
    memo=OBJECT,
    search_attributes=OBJECT,
    created_at=STRING,
    started_at=TEXT_OR_NULL,
    finished_at=TEXT_OR_NULL,
)
PREVIEW_ITEM = obj(at=STRING, local=STRING, utc_offset=STRING, note=TEXT_OR_NULL)
SCHEDULE = also(
    obj(
        schedule_id=STRING,
        uid=STRING,
        namespace=STRING,
        revision=INT,
        status=STRING,
        blocked_reason=TEXT_OR_NULL,
        paused_reason=TEXT_OR_NULL,
        principal=TEXT_OR_NULL,
        spec=OBJECT,
        action=OBJECT,
        overlap_policy=STRING,
        missed_policy=STRING,
        jitter_seconds=INT,
        max_runs=INT_OR_NULL,
        labels=OBJECT,
        memo=OBJECT,
        search_attributes=OBJECT,
        notes=TEXT_OR_NULL,
        next_fire_at=TEXT_OR_NULL,
        last_fired_at=TEXT_OR_NULL,
        fires_count=INT,
        remaining_runs=INT_OR_NULL,
        skipped_trigger_count=INT,
        last_skip_reason=TEXT_OR_NULL,
        last_skipped_at=TEXT_OR_NULL,
        buffered_count=INT,
        latest_run_id=TEXT_OR_NULL,
        running_run_ids={"type": "array", "items": STRING},
        created_at=STRING,
        updated_at=TEXT_OR_NULL,
        deleted_at=TEXT_OR_NULL,
    ),
    # Reading one schedule: its next due times (`?upcoming=`).
    upcoming={"type": "array", "items": PREVIEW_ITEM},
)
WORKFLOW_VERSION = obj(name=STRING, version=INT, definition=OBJECT, created_at=STRING)
ACTIVATION = obj(
    id=STRING,
    workflow=STRING,
    version=INT,
    status=STRING,
    created_at=STRING,
    retired_at=TEXT_OR_NULL,
)
RUN_EVENT = obj(
    id=INT, sequence=INT, event_type=STRING, node_id=TEXT_OR_NULL, payload=ANY, recorded_at=STRING
)
OCCURRENCE = obj(
    kind=STRING,
    instant=STRING,
    through=TEXT_OR_NULL,
    count=INT,
    origin=STRING,
    reason=TEXT_OR_NULL,
    run_id=TEXT_OR_NULL,
    revision=INT,
    observed_at=STRING,
)
INCIDENT = obj(
    id=STRING,
    run_id=STRING,
    node_id=STRING,
    branch_path={"type": "array", "items": STRING},
    error=ANY,
    attempts=INT,
    opened_at=STRING,
    resolved_at=TEXT_OR_NULL,
    resolution=TEXT_OR_NULL,
    report=ANY,
)
REPLAY_STATE = obj(
    status=STRING,
    current_step=TEXT_OR_NULL,
    step_outputs=OBJECT,
    output=ANY,
    error=ANY,
    # Parallel branches by path: where each stands; incidents by id.
    branches=OBJECT,
    incidents=OBJECT,
)

NAMESPACE = obj(name=STRING, max_active_runs=INT_OR_NULL, created_at=STRING)

RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("get", "/health"): obj(status=STRING, database=STRING, clock=STRING, ticker=OBJECT),
    ("get", "/openapi.json"): obj(openapi=STRING, info=OBJECT, paths=OBJECT),
    ("get", "/me"): obj(
        username=STRING,
        superuser=BOOL,
        namespaces={"type": "array", "items": obj(name=STRING, role=STRING)},
    ),
    ("get", "/namespaces"): page(NAMESPACE),
    ("post", "/namespaces"): NAMESPACE,
    ("post", "/calendar/preview"): obj(
        occurrences={
            "type": "array",
            "items": PREVIEW_ITEM,
        }
    ),
    ("post", "/workflows"): WORKFLOW_VERSION,
    ("get", "/workflows"): page(OBJECT),
    ("get", "/workflows/{name}"): {
        **WORKFLOW_VERSION,
        "required": [*WORKFLOW_VERSION["required"], "versions"],
        "properties": {**WORKFLOW_VERSION["properties"], "versions": {"type": "array"}},
    },
    ("post", "/activations"): ACTIVATION,
    ("get", "/activations"): page(ACTIVATION),
    ("post", "/activations/{activation_id}/retire"): ACTIVATION,
    ("get", "/schedules"): page(SCHEDULE),
    ("post", "/schedules"): SCHEDULE,
    ("get", "/schedules/{schedule_id}"): SCHEDULE,
    ("patch", "/schedules/{schedule_id}"): SCHEDULE,
    ("delete", "/schedules/{schedule_id}"): SCHEDULE,
    ("post", "/schedules/{schedule_id}/trigger"): obj(
        outcome=STRING, run_id=TEXT_OR_NULL, reason=TEXT_OR_NULL
    ),
    ("post", "/schedules/{schedule_id}/backfill"): obj(
        results={"type": "array"}, started=INT, skipped=INT
    ),
    ("get", "/schedules/{schedule_id}/occurrences"): page(OCCURRENCE),
    ("get", "/schedules/{schedule_id}/history"): obj(
        schedule_id=STRING,
        namespace=STRING,
        events={"type": "array", "items": OBJECT},
        next_cursor=INT_OR_NULL,
        has_more=BOOL,
    ),
    ("post", "/runs"): RUN,
    ("get", "/runs"): page(RUN),
    ("get", "/runs/{run_id}"): RUN,
    ("get", "/runs/{run_id}/history"): page(RUN_EVENT),
    ("get", "/runs/{run_id}/replay"): obj(replayed=REPLAY_STATE, stored=REPLAY_STATE, agree=BOOL),
    ("post", "/runs/{run_id}/signals/{name}"): obj(
        signal_id=STRING, accepted_at=STRING, status=STRING, reason=TEXT_OR_NULL
    ),
    ("post", "/runs/{run_id}/cancel"): RUN,
    ("post", "/runs/{run_id}/terminate"): RUN,
    ("get", "/incidents"): page(INCIDENT),
    ("get", "/runs/{run_id}/incidents"): page(INCIDENT),
    ("post", "/runs/{run_id}/incidents/{incident_id}/resolve"): INCIDENT,
    ("get", "/tasks"): page(OBJECT),
    ("post", "/tasks/{task_id}/complete"): OBJECT,
    ("post", "/admin/clock"): obj(now=STRING),
    ("post", "/admin/tick"): obj(
        now=STRING,
        rows={"type": "array"},
        deadlines=INT,
        steps=INT,
        # Phases that failed (each logged with its cause); the others still ran.
        failures={"type": "array", "items": OBJECT},
    ),
}
for verb in ("pause", "disable", "resume", "enable", "delete"):
    RESPONSES[("post", f"/schedules/{{schedule_id}}/{verb}")] = SCHEDULE


def response_schema(method: str, path: str) -> dict[str, Any] | None:
    """The success schema of `method path` (an `/api/v1/...` OpenAPI path), if documented."""
    bare = path.removeprefix("/api/v1").removeprefix("/namespaces/{ns}")
    return RESPONSES.get((method, bare or "/"))
