"""Workflows, activations, runs, tasks and incidents: the rest of the API surface."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from almanac import models as m
from almanac.operations import Labels, Operations, _body, _pairs, _params, endpoint, paged
from almanac.transport import Call


class RunOperations(Operations):
    """Operations on workflows and runs, shared by both clients like `Operations`."""

    # --- workflows and activations ----------------------------------------------------------

    @endpoint
    def deploy_workflow(self, definition: Mapping[str, Any]) -> m.WorkflowVersion:
        """Deploy a definition as the workflow's next immutable version."""
        call = Call("POST", self._ns("workflows"), json=dict(definition))
        return self._call(call, m.WorkflowVersion.from_json)

    @paged
    def list_workflows(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[m.WorkflowVersion]:
        call = Call("GET", self._ns("workflows"), _params(limit=limit, cursor=cursor))
        return self._walk(call, m.WorkflowVersion.from_json)

    @endpoint
    def get_workflow(self, name: str, *, version: int | None = None) -> m.WorkflowVersion:
        call = Call("GET", self._ns("workflows", name), _params(version=version))
        return self._call(call, m.WorkflowVersion.from_json)

    @endpoint
    def create_activation(self, workflow: str, *, version: int | None = None) -> m.Activation:
        call = Call("POST", self._ns("activations"), json=_body(workflow=workflow, version=version))
        return self._call(call, m.Activation.from_json)

    @paged
    def list_activations(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[m.Activation]:
        params = _params(workflow=workflow, status=status, limit=limit, cursor=cursor)
        return self._walk(Call("GET", self._ns("activations"), params), m.Activation.from_json)

    @endpoint
    def retire_activation(self, activation_id: str) -> m.Activation:
        call = Call("POST", self._ns("activations", activation_id, "retire"), json={})
        return self._call(call, m.Activation.from_json)

    # --- runs -----------------------------------------------------------------------------------

    @endpoint
    def start_run(
        self,
        workflow: str | None = None,
        *,
        input: Any = None,
        run_id: str | None = None,
        activation_id: str | None = None,
        **extra: Any,
    ) -> m.Run:
        """Start a run (idempotent on `run_id`); `extra` passes labels, queue, timeout_seconds."""
        body = _body(
            workflow=workflow, input=input, run_id=run_id, activation_id=activation_id, **extra
        )
        return self._call(Call("POST", self._ns("runs"), json=body), m.Run.from_json)

    @paged
    def list_runs(
        self,
        *,
        status: str | list[str] | None = None,
        workflow: str | None = None,
        schedule_id: str | None = None,
        labels: Labels | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[m.Run]:
        statuses = ",".join(status) if isinstance(status, list | tuple) else status
        params = _params(
            status=statuses,
            workflow=workflow,
            schedule_id=schedule_id,
            label=_pairs(labels),
            limit=limit,
            cursor=cursor,
        )
        return self._walk(Call("GET", self._ns("runs"), params), m.Run.from_json)

    @endpoint
    def get_run(self, run_id: str) -> m.Run:
        return self._call(Call("GET", self._ns("runs", run_id)), m.Run.from_json)

    @paged
    def iter_run_history(
        self, run_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[m.RunHistoryEvent]:
        params = _params(limit=limit, cursor=cursor)
        call = Call("GET", self._ns("runs", run_id, "history"), params)
        return self._walk(call, m.RunHistoryEvent.from_json)

    @endpoint
    def replay_run(self, run_id: str) -> m.Replay:
        return self._call(Call("GET", self._ns("runs", run_id, "replay")), m.Replay.from_json)

    @endpoint
    def signal_run(self, run_id: str, name: str, payload: Any = None) -> m.SignalResult:
        call = Call("POST", self._ns("runs", run_id, "signals", name), json={"payload": payload})
        return self._call(call, m.SignalResult.from_json)

    @endpoint
    def cancel_run(self, run_id: str, reason: str | None = None) -> m.Run:
        call = Call("POST", self._ns("runs", run_id, "cancel"), json=_body(reason=reason))
        return self._call(call, m.Run.from_json)

    @endpoint
    def terminate_run(self, run_id: str, reason: str | None = None) -> m.Run:
        call = Call("POST", self._ns("runs", run_id, "terminate"), json=_body(reason=reason))
        return self._call(call, m.Run.from_json)

    # --- tasks and incidents -----------------------------------------------------------------

    @paged
    def list_tasks(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[m.Task]:
        params = _params(status=status, run_id=run_id, limit=limit, cursor=cursor)
        return self._walk(Call("GET", self._ns("tasks"), params), m.Task.from_json)

    @endpoint
    def complete_task(self, task_id: str | int, output: Any = None) -> m.Task:
        call = Call("POST", self._ns("tasks", str(task_id), "complete"), json={"output": output})
        return self._call(call, m.Task.from_json)

    @paged
    def list_incidents(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[m.Incident]:
        """Incidents of the namespace (or of one run), page after page."""
        path = self._ns("runs", run_id, "incidents") if run_id else self._ns("incidents")
        params = _params(status=status, limit=limit, cursor=cursor)
        return self._walk(Call("GET", path, params), m.Incident.from_json)

    @endpoint
    def resolve_incident(
        self, run_id: str, incident_id: str | int, action: str, output: Any = None
    ) -> m.Incident:
        """Resolve with retry, skip (completing the step with `output`) or fail: the resolved
        incident, its `report` saying what the resolution released."""
        path = self._ns("runs", run_id, "incidents", str(incident_id), "resolve")
        body: dict[str, Any] = {"action": action}
        if output is not None:
            body["output"] = output
        return self._call(Call("POST", path, json=body), m.Incident.from_json)
