"""The steps of a run, read from its history alone: one row per step, in lanes per branch.

A pure function of the history events (no database), so the run page, its Gantt chart and the
tests all see the same derivation. Step ids are unique across a definition, so a step's node id
names its row; a step inside parallel branches lives in the lane of its `branch_path`. Rows come
in tree order: a lane's steps as they started, each parallel step followed by its branches' lanes
in the order the branches started.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

# A run that ended while a step was still open ends the step with it.
RUN_ENDINGS = {
    "run_cancelled": "cancelled",
    "run_terminated": "terminated",
    "run_timed_out": "timed out",
    "run_failed": "stopped",
}
OPEN_STATUSES = ("running", "waiting", "retrying", "incident")


class Event(Protocol):
    sequence: int
    event_type: str
    node_id: str | None
    branch_path: list[str] | None
    payload: dict[str, Any]
    recorded_at: datetime


@dataclass
class StepRow:
    node_id: str
    lane: tuple[str, ...]
    kind: str
    started_at: datetime
    status: str = "running"
    attempts: int = 0
    ended_at: datetime | None = None
    output: Any = None
    error: Any = None
    held: bool = False
    # Who resolved its incident with Skip (`command_context.actor`), "" when not recorded.
    skipped_by: str | None = None

    @property
    def depth(self) -> int:
        return len(self.lane)

    @property
    def lane_label(self) -> str:
        return " › ".join(self.lane)

    def duration(self, now: datetime) -> timedelta:
        return (self.ended_at or now) - self.started_at


@dataclass
class RunSteps:
    """The rows in tree order, and the time span they cover."""

    rows: list[StepRow] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None


def _lane(event: Event) -> tuple[str, ...]:
    return tuple(event.branch_path or ())


def _started(rows: dict[str, StepRow], order: dict[tuple[str, ...], list[str]], e: Event) -> None:
    node = e.node_id or ""
    kind = str(e.payload.get("type", "action"))
    row = rows.get(node)
    if row is None:
        row = rows[node] = StepRow(node, _lane(e), kind, e.recorded_at)
        order.setdefault(row.lane, []).append(node)
    row.status = "running" if kind in ("action", "parallel") else "waiting"
    row.attempts = int(e.payload.get("attempt", row.attempts or 1))
    row.ended_at, row.skipped_by = None, None


def _failed(row: StepRow, e: Event) -> None:
    row.error = e.payload.get("error")
    row.attempts = int(e.payload.get("attempt", row.attempts))
    if e.payload.get("will_retry"):
        row.status = "retrying"
    else:
        row.status, row.ended_at = "failed", e.recorded_at


def _apply(row: StepRow, e: Event) -> None:
    kind = e.event_type
    if kind == "step_failed":
        _failed(row, e)
    elif kind == "step_completed":
        # A Skip completes the step with the operator's output: it did not complete by itself.
        row.status = "completed" if row.skipped_by is None else "skipped"
        row.ended_at = e.recorded_at
        row.output, row.held = e.payload.get("output"), bool(e.payload.get("held"))
    elif kind == "incident_opened":
        row.status, row.ended_at = "incident", None
        row.error, row.attempts = e.payload.get("error"), int(e.payload.get("attempts", 0))
    elif kind == "incident_resolved" and e.payload.get("action") == "fail":
        row.status, row.ended_at = "failed", e.recorded_at
    elif kind == "incident_resolved" and e.payload.get("action") == "skip":
        asked = e.payload.get("command_context") or {}
        row.skipped_by = str(asked.get("actor") or "")
    elif (
        kind in ("signal_timed_out", "task_timed_out") and e.payload.get("on_timeout") != "continue"
    ):
        row.status, row.ended_at = "timed out", e.recorded_at


def _end_open(rows: Iterable[StepRow], status: str, at: datetime) -> None:
    for row in rows:
        if row.status in OPEN_STATUSES:
            row.status, row.ended_at = status, at


def _tree(rows: dict[str, StepRow], order: dict[tuple[str, ...], list[str]]) -> list[StepRow]:
    """Depth first: each parallel step, then the lanes of its branches as they started."""
    lanes = [lane for lane in order if lane]
    result: list[StepRow] = []

    def walk(lane: tuple[str, ...]) -> None:
        for node in order.get(lane, []):
            result.append(rows[node])
            for child in lanes:
                if child[:-1] == lane and child[-1].split("/", 1)[0] == node:
                    walk(child)

    walk(())
    # A lane whose parallel step is not in the events read (a bounded history) still shows.
    shown = {id(row) for row in result}
    return result + [row for row in rows.values() if id(row) not in shown]


def derive_steps(events: Iterable[Event], now: datetime) -> RunSteps:
    """Every step the history shows, with status, attempts, start, end and output."""
    rows: dict[str, StepRow] = {}
    order: dict[tuple[str, ...], list[str]] = {}
    start = end = None
    for e in events:
        start = start or e.recorded_at
        if e.event_type == "step_started":
            _started(rows, order, e)
        elif e.event_type == "branch_started":
            # Lanes follow their branches' starts, not their first steps' (a branch may start
            # with a step that is only entered later, or a worker may reach a later branch first).
            order.setdefault(_lane(e), [])
        elif e.event_type in RUN_ENDINGS:
            _end_open(rows.values(), RUN_ENDINGS[e.event_type], e.recorded_at)
            end = e.recorded_at
        elif e.event_type == "run_completed":
            end = e.recorded_at
        elif e.node_id in rows:
            _apply(rows[e.node_id or ""], e)
    return RunSteps(_tree(rows, order), start, end or (now if start else None))
