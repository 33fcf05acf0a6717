"""Runs as callers see them: start one, read it and its history, cancel or terminate it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import Namespace, new_uid
from app.db.runs import ACTIVE_RUN_STATUSES, Run, RunHistoryEvent, Workflow
from app.errors import CapacityExceeded, ValidationFailed
from app.inputs import json_size
from app.paging import created_key, keyset, newest_first, split_page
from app.runs import lifecycle, secrets
from app.runs.deadlines import refuse_after_run_timeout
from app.runs.errors import PayloadTooLarge, RunAlreadyExists, RunNotFound, WorkflowNotFound
from app.runs.locking import begin_write, for_update

# The ticker names its runs `schedule:<id>:<stamp>`; a client squatting on those ids could
# stop a schedule from firing, so clients may not start runs with them.
RESERVED_RUN_ID_PREFIX = "schedule:"
RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}")
# Inputs and signal payloads are stored in runs and their history: 256 KiB each at most
# (the whole request body is capped at 1 MiB before this, with the same 413 answer).
MAX_PAYLOAD_BYTES = 256 * 1024


def check_size(what: str, value: Any, limit: int = MAX_PAYLOAD_BYTES) -> None:
    """Refuse a JSON value whose compact UTF-8 encoding is over `limit` bytes (413), counted
    as an action's output is, so echoing an accepted input never fails as too large."""
    size = json_size(value)
    if size > limit:
        raise PayloadTooLarge(what, size, limit)


@dataclass
class RunRequest:
    """What `POST /runs` asks for (exactly one of `workflow` and `activation_id`)."""

    workflow: str | None = None
    activation_id: str | None = None
    input: Any = field(default_factory=dict)
    run_id: str | None = None
    queue: str | None = None
    timeout_seconds: int | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    search_attributes: dict[str, Any] = field(default_factory=dict)


def start(
    session: Session,
    now: datetime,
    namespace: Namespace,
    request: RunRequest,
    by: lifecycle.Actor = None,
) -> tuple[Run, bool]:
    """Start a run, or return the existing one with the same `run_id`; `(run, created)`; `by`
    is who asked (its `command_context`, recorded in `run_started`).

    The caller commits. Runs count against the namespace's `max_active_runs` (429 CAPACITY).
    """
    if (request.workflow is None) == (request.activation_id is None):
        raise ValidationFailed(
            [{"loc": ["workflow"], "msg": "give exactly one of 'workflow' and 'activation_id'"}]
        )
    if request.run_id is not None and not RUN_ID_RE.fullmatch(request.run_id):
        raise ValidationFailed(
            [
                {
                    "loc": ["run_id"],
                    "msg": "must be 1-255 letters, digits, "
                    "'.', '_', ':', '@' or '-', starting alphanumeric",
                }
            ]
        )
    if request.run_id is not None and request.run_id.startswith(RESERVED_RUN_ID_PREFIX):
        msg = f"run ids beginning {RESERVED_RUN_ID_PREFIX!r} are reserved for schedules"
        raise ValidationFailed([{"loc": ["run_id"], "msg": msg}])
    check_size("input", request.input)
    # The input is checked before the write begins: on SQLite the write lock is the whole
    # database's, and a long input against a heavy schema takes up to a second to check.
    existing = _existing(session, namespace, request)
    if existing is not None:
        return _same_run(session, existing, request), False
    target = _target(session, namespace, request)
    secrets.refuse_sealed_text(request.input, ["input"])
    lifecycle.validate_input(target.version.definition, request.input)
    begin_write(session, keep_reads=True)
    if session.get_bind().dialect.name == "sqlite":
        # A new transaction, behind the lock: look again at what another writer may have
        # changed meanwhile (checking once more only if the workflow's version did change).
        existing = _existing(session, namespace, request)
        if existing is not None:
            return _same_run(session, existing, request), False
        now_target = _target(session, namespace, request)
        if now_target.version.id != target.version.id:
            lifecycle.validate_input(now_target.version.definition, request.input)
        target = now_target
    sealed_input = secrets.seal(target.version.definition.get("input_schema"), request.input)
    limit = namespace.max_active_runs
    if limit is not None and lifecycle.count_active_runs(session, namespace.id) >= limit:
        raise CapacityExceeded(
            f"namespace {namespace.name!r} is at its limit of {limit} active runs",
            retry_after=5,
            max_active_runs=limit,
        )
    run_id = request.run_id or f"run-{new_uid()}"
    try:
        with session.begin_nested():
            run = lifecycle.start_run(
                session,
                now,
                namespace,
                target,
                run_id,
                sealed_input,
                timeout_seconds=request.timeout_seconds,
                labels=request.labels,
                memo=request.memo,
                search_attributes=request.search_attributes,
                queue=request.queue,
                by=by,
            )
    except IntegrityError:
        # Another request started the same run id first: answer with that run.
        existing = find_run(session, namespace, run_id)
        if existing is None:
            raise
        return _same_run(session, existing, request), False
    return run, True


def _same_run(session: Session, existing: Run, request: RunRequest) -> Run:
    """The run `request.run_id` names, when the request asks for the same workflow (or pinned
    activation): a retry. Asked for another one, the id is refused (409): answered with the
    other workflow's run as if started, the caller went on believing its own had started."""
    if request.activation_id is not None:
        same = existing.activation_id == request.activation_id
    else:
        name = session.scalar(select(Workflow.name).where(Workflow.id == existing.workflow_id))
        same = name == request.workflow
    if not same:
        raise RunAlreadyExists(existing.run_id)
    return existing


def _existing(session: Session, namespace: Namespace, request: RunRequest) -> Run | None:
    return None if request.run_id is None else find_run(session, namespace, request.run_id)


def _target(session: Session, namespace: Namespace, request: RunRequest) -> lifecycle.RunTarget:
    if (
        request.workflow is not None
        and session.scalar(
            select(Workflow.id).where(
                Workflow.namespace_id == namespace.id, Workflow.name == request.workflow
            )
        )
        is None
    ):
        raise WorkflowNotFound(request.workflow)
    # A pinned activation is held until the run commits (PostgreSQL): a retire meanwhile
    # waits for the run, instead of the run starting on an activation retired before it.
    return lifecycle.resolve_target(
        session,
        namespace,
        workflow=request.workflow,
        activation_id=request.activation_id,
        hold=True,
    )


def find_run(session: Session, namespace: Namespace, run_id: str) -> Run | None:
    return session.scalar(select(Run).where(Run.namespace_id == namespace.id, Run.run_id == run_id))


def get_run(session: Session, namespace: Namespace, run_id: str, *, lock: bool = False) -> Run:
    query = select(Run).where(Run.namespace_id == namespace.id, Run.run_id == run_id)
    run = session.scalar(for_update(session, query) if lock else query)
    if run is None:
        raise RunNotFound(run_id)
    return run


@dataclass
class RunFilter:
    status: list[str] = field(default_factory=list)
    workflow: str | None = None
    schedule_id: str | None = None
    # (key, value) pairs, every one to match: a key may repeat (then with two values nothing
    # matches; kept in a dict, the last value alone was filtered on).
    labels: tuple[tuple[str, str], ...] = ()
    search_attributes: tuple[tuple[str, str], ...] = ()


def list_runs(
    session: Session, namespace: Namespace, limit: int, after: list[Any] | None, where: RunFilter
) -> tuple[list[tuple[Run, str]], list[Any] | None]:
    """Runs newest first with their workflow's name, one keyset page."""
    query = (
        select(Run, Workflow.name)
        # The namespace on both sides: a filter by workflow name then finds the one workflow by
        # its unique (namespace, name) instead of joining every namespace's of that name.
        .join(Workflow, (Workflow.id == Run.workflow_id) & (Workflow.namespace_id == namespace.id))
        .where(Run.namespace_id == namespace.id)
    )
    if where.status:
        query = query.where(Run.status.in_(where.status))
    if where.workflow:
        # By the workflow's id, so the runs are read from their workflow's index (a name only
        # joined would walk the namespace's runs until a page of this workflow's was found).
        flow = select(Workflow.id).where(
            (Workflow.namespace_id == namespace.id) & (Workflow.name == where.workflow)
        )
        query = query.where(Run.workflow_id == flow.scalar_subquery())
    if where.schedule_id:
        query = query.where(Run.schedule_id == where.schedule_id)
    for key, value in where.labels:
        query = query.where(Run.labels[key].as_string() == value)
    for key, value in where.search_attributes:
        query = query.where(Run.search_attributes[key].as_string() == value)
    query = newest_first(query, Run.created_at, Run.id, after, limit)
    rows = [(row[0], row[1]) for row in session.execute(query)]
    return split_page(rows, limit, lambda row: created_key(row[0]))


def history(
    session: Session, run: Run, limit: int, after: list[Any] | None
) -> tuple[list[RunHistoryEvent], list[Any] | None]:
    """The run's history in sequence order, one keyset page."""
    query = select(RunHistoryEvent).where(RunHistoryEvent.run_pk == run.id)
    position = [int(after[0])] if after else None
    query = keyset(query, [RunHistoryEvent.sequence], position, limit, descending=False)
    rows = list(session.scalars(query))
    return split_page(rows, limit, lambda event: [event.sequence])


def cancel(
    session: Session,
    now: datetime,
    namespace: Namespace,
    run_id: str,
    reason: str | None,
    by: lifecycle.Actor = None,
) -> Run:
    """Request cancellation (cooperative: a step in progress finishes first); caller commits."""
    return _end(session, now, namespace, run_id, lifecycle.request_cancel, reason, by)


def terminate(
    session: Session,
    now: datetime,
    namespace: Namespace,
    run_id: str,
    reason: str | None,
    by: lifecycle.Actor = None,
) -> Run:
    """End the run immediately; a step in progress has its result discarded. Caller commits."""
    return _end(session, now, namespace, run_id, lifecycle.terminate_run, reason, by)


def _end(
    session: Session,
    now: datetime,
    namespace: Namespace,
    run_id: str,
    ending: Callable[[Session, Run, datetime, str | None, lifecycle.Actor], None],
    reason: str | None,
    by: lifecycle.Actor,
) -> Run:
    begin_write(session)
    run = get_run(session, namespace, run_id, lock=True)
    _refuse_after_timeout(session, run, now)
    ending(session, run, now, reason, by)
    return run


def _refuse_after_timeout(session: Session, run: Run, now: datetime) -> None:
    """A run whose timeout is due is over (409), even before the scanner has recorded it: an
    end asked for after it does not replace `timed_out` (docs/runs.md, "Timers")."""
    if run.status in ACTIVE_RUN_STATUSES:
        refuse_after_run_timeout(session, run, now)
