"""Starting, ending and cancelling runs, and their history: the calls schedules depend on.

Nothing here commits: callers own the transaction, so a schedule firing can cover the run, its
first events, the occurrence and the audit record at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import referencing.exceptions
from sqlalchemy import ARRAY, Integer, Table, bindparam, event, func, select, text, update
from sqlalchemy.orm import Session

from app.db import Namespace, UTCDateTime
from app.db.bulk import insert_rows
from app.db.runs import (
    ACTIVE_RUN_STATUSES,
    Activation,
    Deadline,
    Run,
    RunBranch,
    RunHistoryEvent,
    RunIncident,
    Task,
    Workflow,
    WorkflowVersion,
)
from app.runs import secrets
from app.runs.errors import ActivationNotFound, ActivationNotReady, InputSchemaError, RunFinished
from app.runs.layout import layout_for
from app.runs.schemas import CheckTooCostly, first_error

# The `command_context` of a change someone asked for ({actor, source, request_id, reason}),
# recorded in the run's history event; None for the engine's own decisions.
Actor = dict[str, Any] | None


@dataclass(frozen=True)
class RunTarget:
    """What a new run executes: an activation and its workflow version."""

    activation: Activation
    workflow: Workflow
    version: WorkflowVersion


def resolve_target(
    session: Session,
    namespace: Namespace,
    *,
    workflow: str | None = None,
    activation_id: str | None = None,
    hold: bool = False,
) -> RunTarget:
    """The pinned activation (must be ready), or the newest ready activation of `workflow`.

    One query reads the activation with its version and workflow (the tick resolves a target
    per page, and each round trip there is on the path of every firing). With `hold`, a pinned
    activation is read afresh (not as the session may hold it from an earlier transaction) and,
    on PostgreSQL, `FOR SHARE`: a retire then waits for the caller's commit, or the caller reads
    it retired."""
    query = (
        select(Activation, WorkflowVersion, Workflow)
        .join(WorkflowVersion, WorkflowVersion.id == Activation.workflow_version_id)
        .join(Workflow, Workflow.id == Activation.workflow_id)
    )
    if activation_id is not None:
        pinned = query.where(Activation.id == activation_id)
        if hold:
            pinned = pinned.execution_options(populate_existing=True)
        if hold and session.get_bind().dialect.name == "postgresql":
            pinned = pinned.with_for_update(read=True, of=Activation)
        found = session.execute(pinned).first()
        if found is None or found[0].namespace_id != namespace.id:
            raise ActivationNotFound(activation_id)
        if found[0].status != "ready":
            raise ActivationNotReady(
                f"activation {activation_id!r} is retired", activation_id=activation_id
            )
    else:
        found = session.execute(
            query.where(
                Workflow.namespace_id == namespace.id,
                Workflow.name == workflow,
                Activation.status == "ready",
            )
            .order_by(Activation.created_at.desc(), Activation.id.desc())
            .limit(1)
        ).first()
        if found is None:
            raise ActivationNotReady(
                f"workflow {workflow!r} has no ready activation", workflow=workflow
            )
    activation, version, flow = found
    return RunTarget(activation, flow, version)


def validate_input(
    definition: dict[str, Any], value: Any, loc: Sequence[str | int] = ("input",)
) -> None:
    """Check `value` against the definition's `input_schema` (422 INPUT_SCHEMA); errors name
    the field from `loc`, where the input stands in the request."""
    name = ".".join(map(str, loc))
    # Not `or {}`: `false` refuses every input (an omitted one arrives as {}).
    schema = definition.get("input_schema", {})
    try:
        error = first_error(schema, value)
    except CheckTooCostly as exc:
        errors = [{"loc": [*loc], "msg": str(exc)}]
        raise InputSchemaError(f"{name}: {exc}", errors=errors) from None
    except referencing.exceptions.Unresolvable as exc:
        # A reference that leads nowhere (or, in a schema stored before deploys checked them,
        # outside the schema): refuse the input, never fetch anything.
        msg = f"the workflow's input_schema has an unresolvable reference: {exc}"
        raise InputSchemaError(msg, errors=[{"loc": [*loc], "msg": msg}]) from None
    if error is not None:
        where = [*loc, *error.absolute_path]
        message = secrets.error_message(
            schema, list(error.absolute_path), error.instance, error.message, error.validator
        )
        raise InputSchemaError(
            f"{'.'.join(map(str, where))}: {message}",
            errors=[{"loc": where, "msg": message}],
        )


def append_event(
    session: Session,
    run: Run,
    now: datetime,
    event_type: str,
    payload: dict[str, Any] | None = None,
    node_id: str | None = None,
    branch_path: list[str] | None = None,
) -> None:
    """Append the run's next history event (sequence is per run, from 1)."""
    run.last_sequence += 1
    row = {
        "run_pk": run.id,
        "sequence": run.last_sequence,
        "event_type": event_type,
        "node_id": node_id,
        "branch_path": branch_path or None,
        "payload": payload or {},
        "recorded_at": now,
    }
    pending: list[dict[str, Any]] | None = session.info.get(_EVENTS_KEY)
    if pending is None:
        session.add(RunHistoryEvent(**row))
    else:
        pending.append(row)


_EVENTS_KEY = "almanac.pending_events"
EVENTS = cast(Table, RunHistoryEvent.__table__)


@contextmanager
def events_together(session: Session) -> Iterator[None]:
    """Within this block, history events are written as rows, all of a flush in one statement
    (`app.db.bulk`), instead of as ORM objects: a worker's batch appends several per step.

    Every flush writes the events appended so far first (and so does the block's end), so a
    query in the block still sees them; appending an event always changes its run, so the
    session is never clean while events wait.
    """
    if session.info.get(_EVENTS_KEY) is not None:
        yield
        return
    session.info[_EVENTS_KEY] = []
    try:
        yield
        _write_events(session)
    finally:
        session.info.pop(_EVENTS_KEY, None)


def pending_events(session: Session) -> list[dict[str, Any]]:
    """The events appended in an `events_together` block and not yet written (a list to cut
    back when a savepoint rolls back what appended them); empty outside such a block."""
    pending: list[dict[str, Any]] | None = session.info.get(_EVENTS_KEY)
    return pending if pending is not None else []


def _write_events(session: Session) -> None:
    pending: list[dict[str, Any]] | None = session.info.get(_EVENTS_KEY)
    if pending:
        rows = list(pending)
        pending.clear()
        insert_rows(session.connection(), EVENTS, rows)


@event.listens_for(Session, "before_flush")
def _events_before_flush(session: Session, _context: Any, _instances: Any) -> None:
    _write_events(session)


def start_run(
    session: Session,
    now: datetime,
    namespace: Namespace,
    target: RunTarget,
    run_id: str,
    run_input: Any,
    *,
    origin: dict[str, Any] | None = None,
    timeout_seconds: int | None = None,
    labels: dict[str, Any] | None = None,
    memo: dict[str, Any] | None = None,
    search_attributes: dict[str, Any] | None = None,
    queue: str | None = None,
    schedule: tuple[str, str] | None = None,
    by: Actor = None,
) -> Run:
    """Create a pending run, its first history events and its run-timeout deadline.

    `origin` is the `ScheduleTriggered` payload when a schedule starts the run; `schedule` is its
    `(uid, schedule_id)`; `by` who asked for a run started by hand. The caller checks uniqueness
    of `run_id` or relies on the constraint.
    """
    run = Run(
        namespace_id=namespace.id,
        run_id=run_id,
        workflow_id=target.workflow.id,
        workflow_version_id=target.version.id,
        activation_id=target.activation.id,
        schedule_uid=schedule[0] if schedule else None,
        schedule_id=schedule[1] if schedule else None,
        status="pending",
        input=run_input,
        step_index=0,
        step_outputs={},
        attempt=0,
        queue=queue,
        labels=labels or {},
        memo=memo or {},
        search_attributes=search_attributes or {},
        claimable_at=now,
        last_sequence=0,
        created_at=now,
    )
    session.add(run)
    session.flush()
    if origin is not None:
        append_event(session, run, now, "ScheduleTriggered", origin)
    append_event(
        session,
        run,
        now,
        "run_started",
        asked(
            {
                "workflow": target.workflow.name,
                "version": target.version.version,
                "activation_id": target.activation.id,
                "input": run_input,
            },
            by,
        ),
    )
    limits = [s for s in (target.version.definition.get("timeout_seconds"), timeout_seconds) if s]
    if limits:
        session.add(
            Deadline(
                run_pk=run.id,
                kind="run_timeout",
                node_id=None,
                created_at=now,
                due_at=now + timedelta(seconds=min(limits)),
            )
        )
    return run


def finish_run(
    session: Session,
    run: Run,
    now: datetime,
    status: str,
    event_type: str,
    payload: dict[str, Any] | None = None,
    node_id: str | None = None,
) -> None:
    """Move `run` to a final status: release its leases, consume its deadlines, close its tasks.

    Every branch stops with it, and an open incident is resolved as `run_<status>`.
    """
    if run.status == "suspended":
        _close_incidents(session, run, now, event_type)
    run.status = status
    run.finished_at = now
    run.claimable_at = None
    run.lease_owner = None
    run.lease_expires_at = None
    # Hot path (every run ends here): table-level statements skip the ORM's autoflush and
    # session synchronisation; the objects this session already holds are updated to match.
    for obj in [*session.identity_map.values(), *session.new]:
        if isinstance(obj, Deadline) and obj.run_pk == run.id and obj.consumed_at is None:
            obj.consumed_at = now
        elif isinstance(obj, Task) and obj.run_pk == run.id and obj.status == "open":
            obj.status = "cancelled"
    deferred: list[tuple[int, datetime]] | None = session.info.get(_DEFERRED_KEY)
    if deferred is None:
        _close_timers(session, [run.id], now)
    else:
        deferred.append((run.id, now))
    if layout_for(session, run).has_parallel:
        _stop_branches(session, run)
    append_event(session, run, now, event_type, payload, node_id)


_DEFERRED_KEY = "almanac.finished_runs"


# PostgreSQL: both in one statement (one round trip), with constant text for any number of runs.
_CLOSE_TIMERS = text(
    "WITH consumed AS (UPDATE deadlines SET consumed_at = :now "
    "WHERE run_pk = ANY(:pks) AND consumed_at IS NULL RETURNING 1) "
    "UPDATE tasks SET status = 'cancelled' WHERE run_pk = ANY(:pks) AND status = 'open'"
).bindparams(bindparam("now", type_=UTCDateTime()), bindparam("pks", type_=ARRAY(Integer)))


def _close_timers(session: Session, run_pks: list[int], now: datetime) -> None:
    """Consume the runs' open deadlines and cancel their open tasks (table-level statements)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_CLOSE_TIMERS, {"now": now, "pks": run_pks})
        return
    deadlines, tasks = cast(Table, Deadline.__table__), cast(Table, Task.__table__)
    session.execute(
        update(deadlines)
        .where(deadlines.c.run_pk.in_(run_pks), deadlines.c.consumed_at.is_(None))
        .values(consumed_at=now)
    )
    session.execute(
        update(tasks)
        .where(tasks.c.run_pk.in_(run_pks), tasks.c.status == "open")
        .values(status="cancelled")
    )


@contextmanager
def finishing_together(session: Session) -> Iterator[None]:
    """Within this block, runs that end close their timers in two statements for all of them,
    at the block's end, instead of two per run.

    Only for a block that reads no deadline or task of a run it ended (a worker committing a
    batch of results: each result touches its own run, and an ended run takes no more); the
    objects the session holds are updated at once either way.
    """
    if session.info.get(_DEFERRED_KEY) is not None:
        yield
        return
    deferred: list[tuple[int, datetime]] = []
    session.info[_DEFERRED_KEY] = deferred
    try:
        yield
    finally:
        session.info.pop(_DEFERRED_KEY, None)
    by_time: dict[datetime, list[int]] = {}
    for run_pk, now in deferred:
        by_time.setdefault(now, []).append(run_pk)
    for now, run_pks in by_time.items():
        _close_timers(session, run_pks, now)


def _stop_branches(session: Session, run: Run) -> None:
    branches = cast(Table, RunBranch.__table__)
    for obj in session.identity_map.values():
        if isinstance(obj, RunBranch) and obj.run_pk == run.id:
            obj.claimable_at = obj.lease_owner = obj.lease_expires_at = obj.held = None
    session.execute(
        update(branches)
        .where(branches.c.run_pk == run.id, branches.c.completed_at.is_(None))
        .values(claimable_at=None, lease_owner=None, lease_expires_at=None, held=None)
    )


def _close_incidents(session: Session, run: Run, now: datetime, resolution: str) -> None:
    """The run ended while suspended: its open incidents end with it (e.g. `run_timed_out`)."""
    query = select(RunIncident).where(
        RunIncident.run_pk == run.id, RunIncident.resolved_at.is_(None)
    )
    for incident in session.scalars(query.order_by(RunIncident.opened_at, RunIncident.id)):
        incident.resolved_at = now
        incident.resolution = resolution
        append_event(
            session,
            run,
            now,
            "incident_resolved",
            {"incident_id": incident.id, "action": resolution, "report": None},
            incident.node_id,
            incident.branch_path,
        )


def terminate_run(
    session: Session, run: Run, now: datetime, reason: str | None = None, by: Actor = None
) -> None:
    """End `run` immediately, whatever it is doing; `by` is who asked (`command_context`)."""
    if run.status not in ACTIVE_RUN_STATUSES:
        raise RunFinished(run.run_id, run.status)
    finish_run(session, run, now, "terminated", "run_terminated", asked({"reason": reason}, by))


def request_cancel(
    session: Session, run: Run, now: datetime, reason: str | None = None, by: Actor = None
) -> None:
    """Ask `run` to stop at its next step boundary; one not in the middle of a step stops now."""
    if run.status not in ACTIVE_RUN_STATUSES:
        raise RunFinished(run.run_id, run.status)
    if run.cancel_requested_at is None:
        run.cancel_requested_at = now
        append_event(session, run, now, "cancel_requested", asked({"reason": reason}, by))
    if not leased(session, run):
        finish_run(session, run, now, "cancelled", "run_cancelled", asked({"reason": reason}, by))


def asked(payload: dict[str, Any], by: Actor) -> dict[str, Any]:
    """`payload` with the `command_context` of whoever asked for the change, when known."""
    return payload if by is None else {**payload, "command_context": by}


def leased(session: Session, run: Run) -> bool:
    """Whether a worker is executing a step of `run` (in any branch)."""
    if run.lease_owner is not None:
        return True
    query = select(RunBranch.id).where(
        RunBranch.run_pk == run.id, RunBranch.lease_owner.is_not(None)
    )
    return session.scalar(query.limit(1)) is not None


def active_runs_of_schedule(session: Session, schedule_uid: str) -> list[Run]:
    """Runs this schedule started that are still pending, running or waiting."""
    return list(
        session.scalars(
            select(Run)
            .where(Run.schedule_uid == schedule_uid, Run.status.in_(ACTIVE_RUN_STATUSES))
            .order_by(Run.id)
        )
    )


# The first key of the advisory lock that orders starts in one namespace (the second is its id).
CAPACITY_LOCK = 7310014


def count_active_runs(session: Session, namespace_id: int) -> int:
    """How many runs of the namespace are active, for `max_active_runs`.

    On PostgreSQL the count first takes the namespace's capacity lock until the transaction
    ends, so two starters cannot both count the same free place: the second counts after the
    first committed its run (SQLite serializes writers anyway).
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(CAPACITY_LOCK, namespace_id)))
    return (
        session.scalar(
            select(func.count())
            .select_from(Run)
            .where(Run.namespace_id == namespace_id, Run.status.in_(ACTIVE_RUN_STATUSES))
        )
        or 0
    )
