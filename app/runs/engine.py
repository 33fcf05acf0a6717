"""Workers: claim a runnable step with a lease, run it outside any transaction, commit its result.

A claim is one short write transaction (`FOR UPDATE SKIP LOCKED` on PostgreSQL, `BEGIN IMMEDIATE`
on SQLite) that takes a lease `(owner, expires_at)` and records `step_started`. The action then runs
with no transaction open. Its result is committed only if the lease is still ours: a terminated or
timed-out run, or a lease another worker recovered, discards it. Delivery is therefore at least
once (a worker that dies mid-step leaves a lease that expires, and the step runs again).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, bindparam, or_, select
from sqlalchemy.orm import Session

from app.db import Database, Namespace, UTCDateTime
from app.db.clock import ManualClock, SystemClock
from app.db.runs import Run
from app.runs import secrets
from app.runs.actions import ActionContext, ActionError, get_action
from app.runs.definitions import step_at
from app.runs.lifecycle import append_event, finish_run
from app.runs.locking import begin_write, for_update
from app.runs.steps import complete_step, definition_of, enter_step, fail_run, iso

log = logging.getLogger(__name__)

ANY_QUEUE = "*"
DEFAULT_LEASE_SECONDS = 60.0
# An action's output is stored in the run and its history; keep it to a sane size.
MAX_OUTPUT_BYTES = 256 * 1024

Clock = SystemClock | ManualClock


@dataclass(frozen=True)
class WorkerSettings:
    """Who is claiming (`name`), for which queue, and for how long a lease lasts."""

    name: str
    queue: str | None = None  # None: the default queue; ANY_QUEUE: every queue
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    # Runs claimed per transaction; their actions run one after the other (throughput vs latency).
    batch: int = 1


def worker_name(suffix: str = "") -> str:
    base = f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"
    return f"{base}:{suffix}" if suffix else base


@dataclass(frozen=True)
class Claim:
    """A leased action step, with everything the action needs so it runs without the database."""

    run_pk: int
    owner: str
    action: str
    context: ActionContext
    max_attempts: int
    backoff_seconds: float


@dataclass(frozen=True)
class Outcome:
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None


_CLAIMABLE: dict[tuple[str | None, int], Any] = {}


def _claimable(queue: str | None, limit: int) -> Any:
    """The claim query for `queue`, built once (its `now` is a bound parameter)."""
    if (queue, limit) not in _CLAIMABLE:
        now = bindparam("now", type_=UTCDateTime())
        query = select(Run).where(
            Run.claimable_at <= now,
            Run.status.in_(("pending", "running")),
            or_(Run.lease_owner.is_(None), Run.lease_expires_at <= now),
        )
        if queue is None:
            query = query.where(or_(Run.queue.is_(None), Run.queue == "default"))
        elif queue != ANY_QUEUE:
            query = query.where(Run.queue == queue)
        _CLAIMABLE[queue, limit] = query.order_by(Run.claimable_at, Run.id).limit(limit)
    return _CLAIMABLE[queue, limit]


def release_expired_lease(session: Session, run: Run, now: datetime) -> None:
    """Record that the worker holding `run` lost its lease; the same attempt will run again."""
    append_event(
        session,
        run,
        now,
        "step_failed",
        {
            "attempt": run.attempt,
            "will_retry": True,
            "error": {
                "type": "lease_expired",
                "message": f"worker {run.lease_owner} did not finish before "
                f"{iso(run.lease_expires_at)}",
            },
        },
        run.current_step,
    )
    run.attempt = max(run.attempt - 1, 0)
    run.lease_owner = None
    run.lease_expires_at = None
    run.claimable_at = now
    if run.cancel_requested_at is not None:
        finish_run(session, run, now, "cancelled", "run_cancelled", {"reason": "cancel requested"})


# Namespace names never change: cached per engine for the action context.
_NAMESPACES: WeakKeyDictionary[Engine, dict[int, str]] = WeakKeyDictionary()


def _namespace_name(session: Session, namespace_id: int) -> str:
    cache = _NAMESPACES.setdefault(session.get_bind().engine, {})
    if namespace_id not in cache:
        namespace = session.get(Namespace, namespace_id)
        cache[namespace_id] = namespace.name if namespace is not None else ""
    return cache[namespace_id]


def _anything_claimable(db: Database, clock: Clock, settings: WorkerSettings) -> bool:
    with db.session() as session:
        now = clock.now(session)
        query = _claimable(settings.queue, 1).with_only_columns(Run.id)
        return session.scalar(query, {"now": now}) is not None


@dataclass
class Batch:
    """What one claim transaction did: leased action steps, and steps advanced without one."""

    claims: list[Claim]
    advanced: int = 0


def claim_batch(
    db: Database, clock: Clock, settings: WorkerSettings, *, peek: bool = False
) -> Batch:
    """Claim up to `settings.batch` runnable runs in one transaction.

    Action steps are leased (returned as claims); wait, signal and task steps are entered and
    cancelled runs closed right away (counted in `advanced`). With `peek` (an idle worker
    polling), SQLite first looks with a plain read, so polling does not take its single write
    lock when there is nothing to do.
    """
    batch = Batch([])
    if peek and db.is_sqlite and not _anything_claimable(db, clock, settings):
        return batch
    with db.session() as session:
        begin_write(session)
        now = clock.now(session)
        query = for_update(session, _claimable(settings.queue, settings.batch), skip_locked=True)
        for run in session.scalars(query, {"now": now}).all():
            claim = _claim_run(session, run, now, settings)
            if claim is None:
                batch.advanced += 1
            else:
                batch.claims.append(claim)
        session.commit()
    return batch


def _claim_run(session: Session, run: Run, now: datetime, settings: WorkerSettings) -> Claim | None:
    if run.lease_owner is not None:
        release_expired_lease(session, run, now)
    if run.status not in ("pending", "running"):
        return None
    if run.cancel_requested_at is not None:
        finish_run(session, run, now, "cancelled", "run_cancelled", {"reason": "cancel requested"})
        return None
    return _lease(session, run, now, settings)


def claim_next(db: Database, clock: Clock, settings: WorkerSettings) -> Claim | bool:
    """Claim one step: a leased action (Claim), True if a step advanced without one, False when
    nothing is runnable."""
    batch = claim_batch(db, clock, replace(settings, batch=1))
    return batch.claims[0] if batch.claims else batch.advanced > 0


def _lease(session: Session, run: Run, now: datetime, settings: WorkerSettings) -> Claim | None:
    definition = definition_of(session, run)
    if run.started_at is None:
        run.started_at = now
    step = step_at(definition, run.step_index)
    if step is None or step["type"] != "action":
        enter_step(session, run, definition, now)
        return None
    run.status = "running"
    run.current_step = step["id"]
    run.attempt += 1
    run.lease_owner = f"{settings.name}:{uuid.uuid4().hex[:12]}"
    run.lease_expires_at = now + timedelta(seconds=settings.lease_seconds)
    append_event(
        session,
        run,
        now,
        "step_started",
        {"type": "action", "action": step["action"], "attempt": run.attempt},
        step["id"],
    )
    retry = step.get("retry") or {}
    context = ActionContext(
        run_id=run.run_id,
        namespace=_namespace_name(session, run.namespace_id),
        step_id=step["id"],
        attempt=run.attempt,
        args=step.get("args"),
        input=secrets.unseal(run.input),
        step_outputs=dict(run.step_outputs),
    )
    return Claim(
        run_pk=run.id,
        owner=run.lease_owner,
        action=step["action"],
        context=context,
        max_attempts=int(retry.get("max_attempts", 1)),
        backoff_seconds=float(retry.get("backoff_seconds", 0)),
    )


def execute(claim: Claim) -> Outcome:
    """Run the claimed action; any exception is the step's failure, never the worker's."""
    fn = get_action(claim.action)
    if fn is None:
        return Outcome(
            False,
            error={
                "type": "action_not_registered",
                "message": f"no action {claim.action!r} in this worker",
            },
        )
    try:
        output = fn(claim.context)
    except ActionError as exc:
        return Outcome(False, error={"type": "action_error", "message": str(exc)})
    except Exception as exc:  # noqa: BLE001 - an action's bug fails its step, not the worker
        return Outcome(False, error={"type": type(exc).__name__, "message": str(exc)})
    try:
        size = len(json.dumps(output))
    except (TypeError, ValueError) as exc:
        return Outcome(False, error={"type": "output_not_json", "message": str(exc)})
    if size > MAX_OUTPUT_BYTES:
        return Outcome(
            False,
            error={
                "type": "output_too_large",
                "message": f"{size} bytes; the limit is {MAX_OUTPUT_BYTES}",
            },
        )
    return Outcome(True, output=output)


def commit_outcomes(db: Database, clock: Clock, results: list[tuple[Claim, Outcome]]) -> int:
    """Commit each step's result whose lease is still ours, in one transaction; how many were."""
    committed = 0
    with db.session() as session:
        begin_write(session)
        now = clock.now(session)
        query = select(Run).where(Run.id.in_([claim.run_pk for claim, _ in results]))
        runs = {run.id: run for run in session.scalars(for_update(session, query.order_by(Run.id)))}
        for claim, outcome in results:
            run = runs.get(claim.run_pk)
            if run is None or run.lease_owner != claim.owner or run.status != "running":
                log.info("discarding the result of %s: the lease is gone", claim.owner)
                continue
            run.lease_owner = None
            run.lease_expires_at = None
            # Actions saw the plaintext of secret inputs; none of it may reach history.
            if outcome.ok:
                complete_step(session, run, now, secrets.scrub(outcome.output, run.input))
            else:
                _fail_attempt(
                    session, run, now, claim, secrets.scrub(outcome.error or {}, run.input)
                )
            committed += 1
        session.commit()
    return committed


def commit_outcome(db: Database, clock: Clock, claim: Claim, outcome: Outcome) -> bool:
    """Commit one step's result if the lease is still ours; False when it was discarded."""
    return commit_outcomes(db, clock, [(claim, outcome)]) == 1


def _fail_attempt(
    session: Session, run: Run, now: datetime, claim: Claim, error: dict[str, Any]
) -> None:
    will_retry = run.attempt < claim.max_attempts and run.cancel_requested_at is None
    payload: dict[str, Any] = {"attempt": run.attempt, "error": error, "will_retry": will_retry}
    if will_retry:
        retry_at = now + timedelta(seconds=claim.backoff_seconds)
        payload["retry_at"] = iso(retry_at)
        run.claimable_at = retry_at
    append_event(session, run, now, "step_failed", payload, run.current_step)
    if will_retry:
        return
    if run.cancel_requested_at is not None:
        finish_run(session, run, now, "cancelled", "run_cancelled", {"reason": "cancel requested"})
        return
    fail_run(session, run, now, {**error, "step": run.current_step, "attempts": run.attempt})


def work_once(db: Database, clock: Clock, settings: WorkerSettings, *, peek: bool = False) -> int:
    """Claim a batch, run its actions, commit their results; the steps advanced (0: idle)."""
    batch = claim_batch(db, clock, settings, peek=peek)
    if batch.claims:
        commit_outcomes(db, clock, [(claim, execute(claim)) for claim in batch.claims])
    return batch.advanced + len(batch.claims)
