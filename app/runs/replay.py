"""Replay (SPEC §6.5): a run's state rebuilt from its history events alone.

Replay reads only the recorded facts (event types, node ids, payloads); never a clock, the runs
table or the workflow definition. `stored_state` reads the same fields from the runs table, so the
two can be compared.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.runs import Run, RunHistoryEvent

FINAL_BY_EVENT = {
    "run_completed": "completed",
    "run_failed": "failed",
    "run_cancelled": "cancelled",
    "run_terminated": "terminated",
    "run_timed_out": "timed_out",
}
STATE_FIELDS = ("status", "current_step", "step_outputs", "output", "error")


def replay_events(events: list[tuple[str, str | None, dict[str, Any]]]) -> dict[str, Any]:
    """Fold `(event_type, node_id, payload)` in sequence order into the run's state."""
    state: dict[str, Any] = {
        "status": None,
        "current_step": None,
        "step_outputs": {},
        "output": None,
        "error": None,
    }
    for event_type, node_id, payload in events:
        if event_type == "run_started":
            state["status"] = "pending"
        elif event_type == "step_started":
            state["current_step"] = node_id
            waiting = payload.get("type") in ("wait", "signal", "task")
            state["status"] = "waiting" if waiting else "running"
        elif event_type == "step_completed":
            state["step_outputs"] = {**state["step_outputs"], node_id: payload.get("output")}
            state["current_step"] = payload.get("next_step") or node_id
            state["status"] = "running"
        elif event_type == "step_failed" and payload.get("will_retry"):
            state["status"] = "running"
        elif event_type in FINAL_BY_EVENT:
            state["status"] = FINAL_BY_EVENT[event_type]
            if event_type == "run_completed":
                state["output"] = payload.get("output")
            if event_type == "run_failed":
                state["error"] = payload.get("error")
    return state


def replay(session: Session, run: Run) -> dict[str, Any]:
    """The run's state according to its history."""
    rows = session.execute(
        select(RunHistoryEvent.event_type, RunHistoryEvent.node_id, RunHistoryEvent.payload)
        .where(RunHistoryEvent.run_pk == run.id)
        .order_by(RunHistoryEvent.sequence)
    )
    return replay_events([(row[0], row[1], row[2] or {}) for row in rows])


def stored_state(run: Run) -> dict[str, Any]:
    """The same fields as the runs table holds them."""
    return {
        "status": run.status,
        "current_step": run.current_step,
        "step_outputs": dict(run.step_outputs or {}),
        "output": run.output,
        "error": run.error,
    }


def compare(session: Session, run: Run) -> dict[str, Any]:
    """`{"replayed", "stored", "agree"}` for the API and the consistency tests."""
    replayed = replay(session, run)
    stored = stored_state(run)
    return {"replayed": replayed, "stored": stored, "agree": replayed == stored}


def disagreements(session: Session) -> list[dict[str, Any]]:
    """Every run whose replayed state differs from the stored one (empty when all agree)."""
    found = []
    for run in session.scalars(select(Run).order_by(Run.id)):
        result = compare(session, run)
        if not result["agree"]:
            found.append({"run_id": run.run_id, **result})
    return found
