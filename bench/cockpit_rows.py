"""Rows for the console bench's run pages: a run of 200 steps in parallel lanes, and incidents.

The run's history is what the engine writes for it (step_started / step_completed per step, with
the branch path inside the parallel step), so the run page derives and draws 200 rows. The
incidents sit on the bench's existing runs, half of them resolved with a recovery report.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert, select

from app.db import Run, RunHistoryEvent, RunIncident, WorkflowVersion

STEPS_RUN_ID = "bench-steps-200"
LANES = 4
PER_LANE = 49  # 4 lanes × 49 + prepare + parallel + publish + report = 200 steps


def definition() -> dict[str, Any]:
    branch = [
        {
            "id": f"l{lane}",
            "steps": [
                {"id": f"l{lane}-s{i}", "type": "action", "action": "noop"} for i in range(PER_LANE)
            ],
        }
        for lane in range(LANES)
    ]
    return {
        "name": "report",
        "steps": [
            {"id": "prepare", "type": "action", "action": "noop"},
            {"id": "fan", "type": "parallel", "branches": branch},
            {"id": "publish", "type": "action", "action": "noop"},
            {"id": "report", "type": "action", "action": "noop"},
        ],
    }


def _events(run_pk: int, start: datetime) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(at: float, kind: str, node: str | None, path: list[str] | None, payload: Any) -> None:
        rows.append(
            {
                "run_pk": run_pk,
                "sequence": len(rows) + 1,
                "event_type": kind,
                "node_id": node,
                "branch_path": path,
                "payload": payload,
                "recorded_at": start + timedelta(seconds=at),
            }
        )

    add(0, "run_started", None, None, {})
    add(0, "step_started", "prepare", None, {"type": "action", "action": "noop", "attempt": 1})
    add(2, "step_completed", "prepare", None, {"output": {"rows": 1280}, "next_step": "fan"})
    add(2, "step_started", "fan", None, {"type": "parallel", "max_concurrency": LANES})
    for lane in range(LANES):
        path = [f"fan/l{lane}"]
        add(2, "branch_started", "fan", path, {"branch": f"l{lane}", "position": lane})
        for i in range(PER_LANE):
            at = 2 + i * (3 + lane)
            node = f"l{lane}-s{i}"
            add(at, "step_started", node, path, {"type": "action", "action": "noop", "attempt": 1})
            add(
                at + 2 + lane, "step_completed", node, path, {"output": {"n": i}, "next_step": None}
            )
    end = 2 + PER_LANE * (3 + LANES)
    add(end, "step_completed", "fan", None, {"output": {}, "next_step": "publish"})
    for offset, node in enumerate(("publish", "report")):
        add(end + offset * 5, "step_started", node, None, {"type": "action", "attempt": 1})
        add(end + offset * 5 + 4, "step_completed", node, None, {"output": None})
    add(end + 10, "run_completed", None, None, {"output": None})
    return rows


def load(conn: Any, namespace_id: int, flow: int, now: datetime, incidents: int) -> None:
    """The 200-step run and `incidents` incidents (every other one resolved)."""
    version = conn.execute(
        insert(WorkflowVersion).returning(WorkflowVersion.id),
        {"workflow_id": flow, "version": 2, "definition": definition(), "created_at": now},
    ).scalar_one()
    start = now - timedelta(hours=1)
    run_pk = conn.execute(
        insert(Run).returning(Run.id),
        {
            "uid": str(uuid.uuid4()),
            "namespace_id": namespace_id,
            "run_id": STEPS_RUN_ID,
            "workflow_id": flow,
            "workflow_version_id": version,
            "status": "completed",
            "input": {},
            "step_index": 4,
            "step_outputs": {},
            "attempt": 1,
            "labels": {},
            "memo": {},
            "search_attributes": {},
            "last_sequence": 0,
            "created_at": start,
            "started_at": start,
            "finished_at": now,
        },
    ).scalar_one()
    conn.execute(insert(RunHistoryEvent), _events(run_pk, start))
    run_pks = list(conn.scalars(select(Run.id).order_by(Run.id.desc()).limit(incidents)))
    rows = []
    for index, pk in enumerate(run_pks):
        opened = now - timedelta(minutes=index)
        resolved = index % 2 == 1
        rows.append(
            {
                "id": str(uuid.UUID(int=(1 << 96) + index)),
                "run_pk": pk,
                "namespace_id": namespace_id,
                "node_id": "charge",
                "branch_path": [],
                "error": {"type": "action_error", "message": "gateway declined"},
                "attempts": 3,
                "opened_at": opened,
                "resolved_at": opened + timedelta(seconds=30) if resolved else None,
                "resolution": "skip" if resolved else None,
                "report": {"held_continuations": 0, "elapsed_waits": 0, "timeouts": 0}
                if resolved
                else None,
            }
        )
    if rows:
        conn.execute(insert(RunIncident), rows)
