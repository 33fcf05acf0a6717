"""Replay: a run's state rebuilt from its history events alone.

Replay reads only the recorded facts (event types, node ids, branch paths, payloads); never a
clock or the runs table. `branch_started` names the branch's first step, where the engine puts
it as it starts it (an action's own `step_started` comes only with a worker's claim); for a
history recorded before it did, that one fact is read from the workflow version `run_started`
names. Parallel branches, held continuations and incidents are folded from their own events.
`stored_state` reads the same fields from the tables, so the two can be compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.runs import Activation, Run, RunHistoryEvent, RunIncident, WorkflowVersion
from app.runs.frames import branches_of
from app.runs.layout import ROOT, build, path_from
from app.runs.locking import for_update
from app.runs.steps import HOLD_RANK

FINAL_BY_EVENT = {
    "run_completed": "completed",
    "run_failed": "failed",
    "run_cancelled": "cancelled",
    "run_terminated": "terminated",
    "run_timed_out": "timed_out",
}
STATE_FIELDS = (
    "status",
    "current_step",
    "step_outputs",
    "output",
    "error",
    "branches",
    "incidents",
)
WAITING = ("wait", "signal", "task")
# The resolutions that lift the barrier once no other incident is open. The others end the run
# and release nothing: `fail`, and the run's own end (`run_terminated`, `run_cancelled`,
# `run_timed_out`, `run_failed`), which resolves its open incidents with a null report.
RELEASING = ("retry", "skip")

Event = tuple[str, str | None, dict[str, Any], list[str] | None]


class _Fold:
    """The state as the events so far describe it: one position per sequence (root and branches).

    A sequence is `running` (a step to run or running), `waiting` (on a deadline, a signal, a
    task or its parallel step's branches), `held` (its step finished during an incident),
    `incident` (its step opened one) or `done`. `first_steps` maps a branch's path to its first
    step (unknown: None).
    """

    def __init__(self, first_steps: Mapping[str, str]) -> None:
        self.first_steps = first_steps
        self.status: str | None = None
        self.sequences: dict[str, dict[str, Any]] = {}
        self.step_outputs: dict[str, Any] = {}
        self.output: Any = None
        self.error: Any = None
        self.incidents: dict[str, str | None] = {}
        # The deadline that is completing a sequence's step (its next step_completed): a
        # held continuation's release order follows it (app/runs/steps.py, `held_order`).
        self.causes: dict[str, tuple[str, str]] = {}
        self.position = 0

    def apply(
        self, event_type: str, node_id: str | None, path: str, payload: dict[str, Any]
    ) -> None:
        self.position += 1
        handler = getattr(self, f"_on_{event_type}", None)
        if handler is not None:
            handler(node_id, path, payload)
        elif event_type in FINAL_BY_EVENT:
            self.status = FINAL_BY_EVENT[event_type]
            if event_type == "run_completed":
                self.output = payload.get("output")
            if event_type == "run_failed":
                self.error = payload.get("error")

    def _on_run_started(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        self.status = "pending"
        self.sequences[ROOT] = {"current_step": None, "state": "running", "done": False}

    def _on_step_started(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        state = "waiting" if kind in WAITING or kind == "parallel" else "running"
        self.sequences[path].update(current_step=node_id, state=state)

    def _on_step_completed(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        self.step_outputs[node_id or ""] = payload.get("output")
        sequence = self.sequences[path]
        reason, due = self.causes.pop(path, ("completion", ""))
        following = payload.get("next_step") or node_id
        if payload.get("held"):
            sequence["state"] = "held"
            sequence["held"] = {"kind": "advance", "next": following}
            sequence["held"]["order"] = (HOLD_RANK[reason], due, node_id or "", self.position)
        else:
            sequence.update(current_step=following, state="running")

    def _on_wait_elapsed(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        self.causes[path] = ("wait", payload.get("deadline") or "")

    def _timed_out(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        due = payload.get("deadline") or ""
        if payload.get("on_timeout") == "continue":
            self.causes[path] = ("timeout", due)
        elif None in self.incidents.values():
            # The failure waits for the barrier, then fails the run (its run_failed follows).
            sequence = self.sequences[path]
            sequence["state"] = "held"
            sequence["held"] = {"kind": "fail", "order": (0, due, node_id or "", self.position)}

    _on_signal_timed_out = _timed_out
    _on_task_timed_out = _timed_out

    def _on_step_failed(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        if payload.get("will_retry"):
            self.sequences[path]["state"] = "running"

    def _on_branch_started(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        # The engine enters the first step at once: an action is claimable from then on, and
        # the other kinds record their own step_started right after.
        first = payload.get("first_step") or self.first_steps.get(path)
        self.sequences[path] = {"current_step": first, "state": "running", "done": False}

    def _on_branch_completed(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        self.sequences[path].update(state="done", done=True)

    def _on_incident_opened(self, node_id: str | None, path: str, payload: dict[str, Any]) -> None:
        self.incidents[payload["incident_id"]] = None
        self.sequences[path]["state"] = "incident"

    def _on_incident_resolved(
        self, node_id: str | None, path: str, payload: dict[str, Any]
    ) -> None:
        action = payload.get("action")
        self.incidents[payload["incident_id"]] = action
        if action == "retry":
            self.sequences[path]["state"] = "running"
        if None in self.incidents.values() or action not in RELEASING:
            return  # still suspended; or the run ends now and releases nothing
        # The barrier lifted: the held continuations go on in their release order, as the
        # engine releases them, until one fails the run.
        held = [seq for seq in self.sequences.values() if seq.get("held")]
        for sequence in sorted(held, key=lambda seq: seq["held"]["order"]):
            continuation = sequence.pop("held")
            sequence["state"] = "running"
            if continuation["kind"] == "fail":
                return
            sequence["current_step"] = continuation["next"]

    def derived_status(self) -> str | None:
        if self.status in FINAL_BY_EVENT.values() or self.status is None:
            return self.status
        if None in self.incidents.values():
            return "suspended"
        root = self.sequences.get(ROOT, {})
        if self.status == "pending" and root.get("current_step") is None:
            return "pending"
        states = [seq["state"] for seq in self.sequences.values() if not seq["done"]]
        return "running" if "running" in states else "waiting"

    def state(self) -> dict[str, Any]:
        return {
            "status": self.derived_status(),
            "current_step": self.sequences.get(ROOT, {}).get("current_step"),
            "step_outputs": self.step_outputs,
            "output": self.output,
            "error": self.error,
            "branches": {
                path: {"current_step": seq["current_step"], "done": seq["done"]}
                for path, seq in self.sequences.items()
                if path != ROOT
            },
            "incidents": self.incidents,
        }


def replay_events(
    events: list[tuple[str, str | None, dict[str, Any]]] | list[Event],
    first_steps: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Fold `(event_type, node_id, payload[, branch_path])` in sequence order into the state;
    `first_steps` names each branch path's first step (see `first_steps_of`)."""
    fold = _Fold(first_steps or {})
    for event in events:
        branch = event[3] if len(event) > 3 else None  # type: ignore[misc]
        fold.apply(event[0], event[1], path_from(branch), event[2] or {})
    return fold.state()


def replay(session: Session, run: Run) -> dict[str, Any]:
    """The run's state according to its history."""
    rows = session.execute(
        select(
            RunHistoryEvent.event_type,
            RunHistoryEvent.node_id,
            RunHistoryEvent.payload,
            RunHistoryEvent.branch_path,
        )
        .where(RunHistoryEvent.run_pk == run.id)
        .order_by(RunHistoryEvent.sequence)
    )
    events: list[Event] = [(row[0], row[1], row[2] or {}, row[3]) for row in rows]
    older = any(e[0] == "branch_started" and "first_step" not in e[2] for e in events)
    return replay_events(events, first_steps_of(session, events) if older else None)


def first_steps_of(session: Session, events: list[Event]) -> dict[str, str]:
    """Each branch path's first step, in the workflow version the run's `run_started` names:
    for histories recorded before `branch_started` carried `first_step` (2026-12-03).

    The engine puts a branch at its first step as it starts it, but when that step is an
    action no event names it until a worker claims it: without this, a branch started and not
    yet claimed (or never, once the run ended) would replay at no step at all.
    """
    started = next((event[2] for event in events if event[0] == "run_started"), {})
    activation = session.get(Activation, started.get("activation_id") or "")
    if activation is None:
        return {}
    version = session.get(WorkflowVersion, activation.workflow_version_id)
    assert version is not None
    sequences = build(version.definition).sequences
    return {path: steps[0]["id"] for path, steps in sequences.items() if path != ROOT}


def stored_state(session: Session, run: Run) -> dict[str, Any]:
    """The same fields as the runs, branches and incidents tables hold them."""
    incidents = session.scalars(select(RunIncident).where(RunIncident.run_pk == run.id))
    return {
        "status": run.status,
        "current_step": run.current_step,
        "step_outputs": dict(run.step_outputs or {}),
        "output": run.output,
        "error": run.error,
        "branches": {
            branch.path: {
                "current_step": branch.current_step,
                "done": branch.completed_at is not None,
            }
            for branch in branches_of(session, run)
        },
        "incidents": {incident.id: incident.resolution for incident in incidents},
    }


def compare(session: Session, run: Run) -> dict[str, Any]:
    """`{"replayed", "stored", "agree"}` for the API and the consistency tests.

    On PostgreSQL each statement reads its own snapshot, so a worker committing between the
    reads of the run, its history and its branches would show them a step apart. Every write to
    a run's history or branches updates the run row under its lock, so the run is read again
    `FOR SHARE` first: until this transaction ends nothing of the run changes, and the reads
    agree with one another (SQLite's read transaction is one snapshot already).
    """
    query = for_update(session, select(Run).where(Run.id == run.id), share=True)
    run = session.scalar(query.execution_options(populate_existing=True)) or run
    replayed = replay(session, run)
    stored = stored_state(session, run)
    return {"replayed": replayed, "stored": stored, "agree": replayed == stored}


def disagreements(session: Session) -> list[dict[str, Any]]:
    """Every run whose replayed state differs from the stored one (empty when all agree)."""
    found = []
    for run in session.scalars(select(Run).order_by(Run.id)):
        result = compare(session, run)
        if not result["agree"]:
            found.append({"run_id": run.run_id, **result})
    return found
