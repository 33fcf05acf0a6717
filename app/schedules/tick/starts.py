"""Starting a schedule's runs: one occurrence's start recorded (`start_occurrence`), and the
starters that write the run, through `lifecycle.start_run` or in bulk on the tick's hot path.

`BulkStarter` writes exactly the rows `lifecycle.start_run` writes (the run, its
`ScheduleTriggered` and `run_started` events, its run-timeout deadline) with a few Core
statements per page instead of a flush per run: sent at once by `flush`, or built by `prepare`
(PostgreSQL, ids drawn first) for the tick's writer thread to send;
tests/schedules/test_registry_and_starts.py compares both with `lifecycle.start_run`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.orm import Session

from app.calendar import format_utc
from app.db import Deadline, Namespace, Run, RunHistoryEvent, Schedule, rollup
from app.db.announce import work_ready
from app.db.bulk import Statement, allocate_ids, insert_rows, insert_statement
from app.runs import lifecycle
from app.runs.lifecycle import RunTarget
from app.schedules.audit import CommandContext, check_origin
from app.schedules.ledger import Writes
from app.schedules.tick.policy import run_id_for

RUNS = cast(Table, Run.__table__)
# A page's firings share a few instants: each is formatted once.
_utc = lru_cache(maxsize=4096)(format_utc)
EVENTS = cast(Table, RunHistoryEvent.__table__)
DEADLINES = cast(Table, Deadline.__table__)


@dataclass
class RunStart:
    """Everything a starter needs to start one run for a schedule."""

    run_id: str
    target: RunTarget
    run_input: Any
    origin: dict[str, Any]
    timeout_seconds: int | None
    schedule: Schedule


Starter = Callable[[RunStart], str]


@dataclass(frozen=True)
class Firing:
    """One occurrence being acted on: its canonical `instant`, the time its run records as the
    occurrence time, where it comes from, the overlap policy applied, and the `outcome` its
    `ScheduleTriggered` event records if it starts (`triggered`, `drained`, `backfilled`)."""

    instant: datetime
    occurrence_time: datetime
    origin: str
    policy: str
    outcome: str


def start_occurrence(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    target: RunTarget,
    starter: Starter,
    firing: Firing,
    context: CommandContext,
) -> str:
    """Start the run of one occurrence and record it; returns the run id."""
    run_id = run_id_for(schedule.schedule_id, firing.instant, firing.origin)
    policy, occurrence_time = firing.policy, firing.occurrence_time
    trigger_number = schedule.fires_count + 1
    spec = schedule.spec
    occurred = _utc(occurrence_time)
    payload = {
        "schedule_id": schedule.schedule_id,
        "schedule_uid": schedule.uid,
        "cron_expression": (spec.get("cron_expressions") or [None])[0],
        "timezone": spec.get("timezone", "UTC"),
        "overlap_policy": policy,
        "trigger_number": trigger_number,
        "occurrence_time": occurred,
    }
    check_origin(payload)
    action = schedule.action
    limits = [
        s for s in (action.get("execution_timeout_seconds"), action.get("run_timeout_seconds")) if s
    ]
    run_uid = starter(
        RunStart(
            run_id,
            target,
            action.get("input", {}),
            payload,
            min(limits) if limits else None,
            schedule,
        )
    )
    schedule.fires_count = trigger_number
    schedule.last_fired_at = now
    schedule.latest_run_id = run_id
    if schedule.remaining_runs is not None:
        schedule.remaining_runs -= 1
    w.event(
        schedule,
        now,
        "ScheduleTriggered",
        {
            "workflow_instance_id": run_id,
            "workflow_run_id": run_uid,
            "outcome": firing.outcome,
            "effective_overlap_policy": policy,
            "trigger_number": trigger_number,
            "occurrence_time": occurred,
            "command_context": context.to_json(),
        },
        run_id,
        run_uid,
    )
    return run_id


def orm_starter(session: Session, now: datetime, namespace: Namespace) -> Starter:
    """A starter that calls the runs contract directly (manual triggers, backfill, buffers)."""

    def start(request: RunStart) -> str:
        schedule = request.schedule
        run = lifecycle.start_run(
            session,
            now,
            namespace,
            request.target,
            request.run_id,
            request.run_input,
            origin=request.origin,
            timeout_seconds=request.timeout_seconds,
            labels=schedule.labels,
            memo=schedule.memo,
            search_attributes=schedule.search_attributes,
            queue=schedule.action.get("queue"),
            schedule=(schedule.uid, schedule.schedule_id),
        )
        return run.uid

    return start


def random_uid() -> str:
    """A random (version 4) UUID's text, like `app.db.new_uid` at a fraction of its cost."""
    digits = os.urandom(16).hex()
    variant = "89ab"[int(digits[16], 16) & 3]
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-{digits[20:]}"


class BulkStarter:
    """Collects run starts and inserts them together (Core, for the tick's hot path)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.pending: list[tuple[str, RunStart]] = []

    def __call__(self, request: RunStart) -> str:
        uid = random_uid()
        self.pending.append((uid, request))
        return uid

    def flush(self, session: Session) -> None:
        """Insert the collected starts now (the ids come back from the insert)."""
        if not self.pending:
            return
        rows = [self._run_row(uid, request) for uid, request in self.pending]
        conn = session.connection()
        pk_by_uid = {uid: pk for pk, uid in insert_rows(conn, RUNS, rows, ("id", "uid"))}
        pks = [pk_by_uid[row["uid"]] for row in rows]
        rollup.record_inserted(session, zip(pks, rows, strict=True))
        for table, children in self._children(pks):
            insert_rows(conn, table, children)
        work_ready(session)
        self.pending = []

    def prepare(self, session: Session) -> list[Statement]:
        """PostgreSQL: the statements that insert the collected starts, built now with ids
        drawn from the runs' sequence, so another thread only has to send them."""
        if not self.pending:
            return []
        conn = session.connection()
        pks = allocate_ids(conn, RUNS, len(self.pending))
        rows = [
            self._run_row(uid, request) | {"id": pk}
            for pk, (uid, request) in zip(pks, self.pending, strict=True)
        ]
        rollup.record_inserted(session, zip(pks, rows, strict=True))
        statements = [insert_statement(conn.dialect, RUNS, rows)]
        statements += [
            insert_statement(conn.dialect, table, children)
            for table, children in self._children(pks)
            if children
        ]
        work_ready(session)
        self.pending = []
        return statements

    def _children(self, pks: list[int]) -> list[tuple[Table, list[dict[str, Any]]]]:
        """The rows each run starts with, besides itself: its two events (in two batches: a
        page's `run_started` events usually share one payload, which then travels and is
        parsed once instead of once per run) and its run-timeout deadline."""
        now = self.now
        origins: list[dict[str, Any]] = []
        starts: list[dict[str, Any]] = []
        deadlines: list[dict[str, Any]] = []
        # What a target contributes, read once per target (ORM attributes cost a call each).
        shared: dict[int, tuple[dict[str, Any], int | None]] = {}
        for pk, (_uid, request) in zip(pks, self.pending, strict=True):
            target = request.target
            if id(target) not in shared:
                shared[id(target)] = (
                    {
                        "workflow": target.workflow.name,
                        "version": target.version.version,
                        "activation_id": target.activation.id,
                    },
                    target.version.definition.get("timeout_seconds"),
                )
            started, definition_timeout = shared[id(target)]
            origins.append(
                {
                    "run_pk": pk,
                    "sequence": 1,
                    "event_type": "ScheduleTriggered",
                    "node_id": None,
                    "payload": request.origin,
                    "recorded_at": now,
                }
            )
            starts.append(
                {
                    "run_pk": pk,
                    "sequence": 2,
                    "event_type": "run_started",
                    "node_id": None,
                    "recorded_at": now,
                    "payload": started | {"input": request.run_input},
                }
            )
            limits = [s for s in (definition_timeout, request.timeout_seconds) if s]
            if limits:
                deadlines.append(
                    {
                        "run_pk": pk,
                        "kind": "run_timeout",
                        "node_id": None,
                        "created_at": now,
                        "due_at": now + timedelta(seconds=min(limits)),
                    }
                )
        return [(EVENTS, origins), (EVENTS, starts), (DEADLINES, deadlines)]

    def _run_row(self, uid: str, request: RunStart) -> dict[str, Any]:
        schedule, target = request.schedule, request.target
        return {
            "uid": uid,
            "namespace_id": schedule.namespace_id,
            "run_id": request.run_id,
            "workflow_id": target.workflow.id,
            "workflow_version_id": target.version.id,
            "activation_id": target.activation.id,
            "schedule_uid": schedule.uid,
            "schedule_id": schedule.schedule_id,
            "status": "pending",
            "input": request.run_input,
            "step_index": 0,
            "step_outputs": {},
            "attempt": 0,
            "queue": schedule.action.get("queue"),
            "labels": schedule.labels or {},
            "memo": schedule.memo or {},
            "search_attributes": schedule.search_attributes or {},
            "claimable_at": self.now,
            "last_sequence": 2,
            "created_at": self.now,
        }
