"""Workers: claim a runnable step with a lease, run it outside any transaction, commit its result.

A claim is one short write transaction (`FOR UPDATE SKIP LOCKED` on PostgreSQL, `BEGIN IMMEDIATE`
on SQLite) that takes a lease `(owner, expires_at)` and records `step_started`. The action then runs
with no transaction open. Its result is committed only if the lease is still ours: a terminated or
timed-out run, or a lease another worker recovered, discards it. Delivery is therefore at least
once (a worker that dies mid-step leaves a lease that expires, and the step runs again).

A claim takes a batch of steps; the heartbeat keeps all their leases alive, and steps not started
within the batch's time budget are handed back unstarted (docs/runs.md, "Batches").
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, select
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database, Namespace
from app.db.runs import Deadline, Run, RunBranch
from app.db.session import database_cause, log_failure
from app.inputs import MAX_JSON_DEPTH, json_depth, storable, unstorable_at
from app.runs import deadlines, secrets
from app.runs.actions import ActionContext, ActionError, get_action
from app.runs.claimable import (
    CLAIMABLE_STATUSES,
    anything_claimable,
    claimable_runs,
    lock_claimable_branches,
)
from app.runs.claims import (
    ANY_QUEUE,
    DEFAULT_LEASE_SECONDS,
    Claim,
    ClaimSize,
    Clock,
    Outcome,
    WorkerSettings,
    worker_name,
)
from app.runs.frames import Frame, path_of, settle
from app.runs.incidents import open_incident
from app.runs.leases import Heartbeat, release_expired_lease, release_unstarted
from app.runs.lifecycle import events_together, finishing_together, pending_events
from app.runs.locking import begin_write, for_update
from app.runs.steps import (
    complete_step,
    definition_of,
    enter_step,
    fail_run,
    layout_for,
    stop_if_cancelled,
)
from app.runs.waiting import record

log = logging.getLogger(__name__)

__all__ = [
    "ANY_QUEUE",
    "DEFAULT_LEASE_SECONDS",
    "Claim",
    "ClaimSize",
    "Clock",
    "Heartbeat",
    "Outcome",
    "WorkerSettings",
    "claim_batch",
    "claim_next",
    "commit_outcome",
    "commit_outcomes",
    "execute",
    "lease_owner",
    "release_expired_lease",
    "work_once",
    "worker_name",
]

# An action's output is stored in the run and its history; keep it to a sane size.
MAX_OUTPUT_BYTES = 256 * 1024


# A lease's owner: the worker's name, this process's random prefix and a counter; unique like a
# uuid per claim without drawing random bytes for each claim. A forked child draws its own.
_LEASES = itertools.count(1)
_LEASE_PREFIX = [uuid.uuid4().hex[:8]]
os.register_at_fork(after_in_child=lambda: _LEASE_PREFIX.__setitem__(0, uuid.uuid4().hex[:8]))


def lease_owner(worker: str) -> str:
    """A new lease's owner for `worker`: never the same twice, in this process or another."""
    return f"{worker}:{_LEASE_PREFIX[0]}{next(_LEASES):x}"


# Namespace names never change: cached per engine for the action context.
_NAMESPACES: WeakKeyDictionary[Engine, dict[int, str]] = WeakKeyDictionary()


def _namespace_name(session: Session, namespace_id: int) -> str:
    cache = _NAMESPACES.setdefault(session.get_bind().engine, {})
    if namespace_id not in cache:
        namespace = session.get(Namespace, namespace_id)
        cache[namespace_id] = namespace.name if namespace is not None else ""
    return cache[namespace_id]


@dataclass
class Batch:
    """What one claim transaction did: leased action steps, and steps advanced without one."""

    claims: list[Claim]
    advanced: int = 0

    def add(self, claim: Claim | None) -> None:
        if claim is None:
            self.advanced += 1
        else:
            self.claims.append(claim)


def claim_batch(
    db: Database, clock: Clock, settings: WorkerSettings, *, peek: bool = False
) -> Batch:
    """Claim up to `settings.batch` runnable steps in one transaction.

    Branch steps of runs already under way come first, then runs' root steps. Action steps are
    leased (returned as claims); wait, signal and task steps are entered and cancelled runs closed
    right away (counted in `advanced`). With `peek` (an idle worker polling), SQLite first looks
    with a plain read, so polling does not take its single write lock when there is nothing to do.

    When the database refuses the batch for its data (a value a column cannot hold), it is
    claimed again with each run in a savepoint of its own, and a run whose step the database
    refuses alone is failed (`claim_failed`): claimed oldest first, it came first in every
    claim, so the claims of every worker failed with it and every other run waited.
    """
    if peek and db.is_sqlite and not anything_claimable(db, clock, settings):
        return Batch([])
    try:
        return _claim(db, clock, settings, alone=False)
    except (DataError, IntegrityError) as exc:
        log_failure(log, "claiming a batch failed; claiming each run alone", exc)
        return _claim(db, clock, settings, alone=True)


def _claim(db: Database, clock: Clock, settings: WorkerSettings, *, alone: bool) -> Batch:
    batch = Batch([])
    claim = _claim_alone if alone else _claim_frame
    with db.session() as session:
        begin_write(session)
        now = clock.now(session)
        with events_together(session):
            pairs = lock_claimable_branches(session, settings, now)
            overdue = deadlines.overdue_run_timeouts(session, {run.id for _, run in pairs}, now)
            for branch, run in pairs:
                if not _times_out(session, overdue, run, now):
                    batch.add(claim(session, run, branch, now, settings))
            left = settings.batch - len(batch.claims) - batch.advanced
            if left > 0:
                query = for_update(session, claimable_runs(settings.queue, left), skip_locked=True)
                runs = session.scalars(query, {"now": now}).all()
                overdue = deadlines.overdue_run_timeouts(session, [run.id for run in runs], now)
                for run in runs:
                    if not _times_out(session, overdue, run, now):
                        batch.add(claim(session, run, run, now, settings))
        session.commit()
    return batch


def _claim_alone(
    session: Session, run: Run, frame: Frame, now: datetime, settings: WorkerSettings
) -> Claim | None:
    """`_claim_frame` in a savepoint; a run whose step the database refuses is failed."""
    pending = pending_events(session)
    kept = len(pending)
    try:
        with session.begin_nested():
            return _claim_frame(session, run, frame, now, settings)
    except (DataError, IntegrityError) as exc:
        del pending[kept:]  # events of the claim rolled back, not yet written
        message = storable(database_cause(exc))
        log.error("run %s failed: the database refused its next step: %s", run.run_id, message)
        error = {"type": "claim_failed", "message": message}
        fail_run(session, run, now, error, frame.current_step)
        return None


def _times_out(session: Session, overdue: dict[int, Deadline], run: Run, now: datetime) -> bool:
    """Apply the run's due timeout instead of starting its next step (once per run): an action
    is never started after its run's deadline, whether or not the scanner has come by."""
    deadline = overdue.pop(run.id, None)
    if deadline is not None:
        deadlines.apply(session, deadline, run, now)
        return True
    return run.status == "timed_out"  # by this batch, for another branch of the run


def _claim_frame(
    session: Session, run: Run, frame: Frame, now: datetime, settings: WorkerSettings
) -> Claim | None:
    if frame.lease_owner is not None:
        release_expired_lease(session, run, frame, now)
    if run.status not in CLAIMABLE_STATUSES or frame.claimable_at is None:
        return None
    if run.cancel_requested_at is not None:
        frame.claimable_at = None
        stop_if_cancelled(session, run, now)
        return None
    claim = _lease(session, run, frame, now, settings)
    if claim is None:
        settle(session, run, layout_for(session, run))
    else:
        run.status = "running"  # a step of it is executing
    return claim


def claim_next(db: Database, clock: Clock, settings: WorkerSettings) -> Claim | bool:
    """Claim one step: a leased action (Claim), True if a step advanced without one, False when
    nothing is runnable."""
    batch = claim_batch(db, clock, replace(settings, batch=1))
    return batch.claims[0] if batch.claims else batch.advanced > 0


def _lease(
    session: Session, run: Run, frame: Frame, now: datetime, settings: WorkerSettings
) -> Claim | None:
    layout = layout_for(session, run)
    if run.started_at is None:
        run.started_at = now
    step = layout.step(path_of(frame), frame.step_index)
    if step is None or step["type"] != "action":
        enter_step(session, run, frame, now)
        return None
    frame.current_step = step["id"]
    frame.attempt += 1
    frame.lease_owner = lease_owner(settings.name)
    frame.lease_expires_at = now + timedelta(seconds=settings.lease_seconds)
    payload = {"type": "action", "action": step["action"], "attempt": frame.attempt}
    record(session, run, frame, now, "step_started", payload, step["id"])
    retry = step.get("retry") or {}
    # A secret no configured key decrypts fails this run's attempt, not the worker's batch
    # (which it would roll back, again and again, holding every other run up).
    refused = None
    try:
        plain_input = secrets.unseal(run.input)
    except secrets.SecretUnavailable as exc:
        plain_input, refused = None, {"type": "secret_unavailable", "message": str(exc)}
    context = ActionContext(
        run_id=run.run_id,
        namespace=_namespace_name(session, run.namespace_id),
        step_id=step["id"],
        attempt=frame.attempt,
        args=step.get("args"),
        input=plain_input,
        step_outputs=dict(run.step_outputs),
    )
    return Claim(
        run_pk=run.id,
        owner=frame.lease_owner,
        action=step["action"],
        context=context,
        max_attempts=int(retry.get("max_attempts", 1)),
        backoff_seconds=float(retry.get("backoff_seconds", 0)),
        branch_pk=frame.id if isinstance(frame, RunBranch) else None,
        refused=refused,
    )


def execute(claim: Claim) -> Outcome:
    """Run the claimed action; any exception is the step's failure, never the worker's."""
    if claim.refused is not None:
        return Outcome(False, error=claim.refused)
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
        return Outcome(False, error={"type": "action_error", "message": storable(str(exc))})
    # An action's bug fails its step, not the worker: anything an action raises, `sys.exit()`,
    # KeyboardInterrupt and GeneratorExit included, ended the worker's thread quietly, one
    # thread per attempt, until none was left. (The worker's own stop comes from its signal
    # handlers, never as an exception in the action.)
    except BaseException as exc:  # noqa: BLE001
        return Outcome(False, error={"type": type(exc).__name__, "message": storable(str(exc))})
    return checked_output(output)


def checked_output(output: Any) -> Outcome:
    """The step's outcome for what its action returned: the output as the JSON it will be
    stored as, or the step's failure saying why it cannot be.

    Every refusal here fails the step alone. What got past these checks once failed later, in
    the worker (a key that is not a string, nesting deep enough to exhaust the encoder) or in
    the commit of the worker's whole batch (NaN, which PostgreSQL's json refuses): the batch's
    results were lost and its actions ran again each time they were claimed, forever.
    """
    if json_depth(output) > MAX_JSON_DEPTH:
        msg = f"it nests more than {MAX_JSON_DEPTH} levels deep (JSON stored here may nest 64)"
        return Outcome(False, error={"type": "output_not_json", "message": msg})
    wrong_key = _key_not_text(output)
    if wrong_key is not None:
        path, key = wrong_key
        msg = f"the key {storable(repr(key))} is not a string: JSON object keys are strings"
        return Outcome(False, error={"type": "output_not_json", "message": msg, "path": path})
    try:
        text = json.dumps(output, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        return Outcome(False, error={"type": "output_not_json", "message": storable(str(exc))})
    # Stored as read back from its JSON: tuples become lists, str and float subclasses plain.
    stored = json.loads(text)
    # Text no database can store would fail the commit of the whole batch, again at each claim.
    unstorable = unstorable_at(stored, [])
    if unstorable is not None:
        path, message = unstorable
        return Outcome(
            False, error={"type": "output_not_storable", "message": message, "path": path}
        )
    size = len(text.encode())  # as `json_size` counts: compact, UTF-8
    if size > MAX_OUTPUT_BYTES:
        return Outcome(
            False,
            error={
                "type": "output_too_large",
                "message": f"{size} bytes; the limit is {MAX_OUTPUT_BYTES}",
            },
        )
    return Outcome(True, output=stored)


def _key_not_text(value: Any) -> tuple[list[str | int], Any] | None:
    """The path to the first object key that is not a string, and that key; iterative."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return where, key
                stack.append((child, [*where, key]))
        elif isinstance(item, list | tuple):
            stack.extend((child, [*where, index]) for index, child in enumerate(item))
    return None


def commit_outcomes(
    db: Database,
    clock: Clock,
    results: list[tuple[Claim, Outcome]],
    *,
    hand_back: Sequence[Claim] = (),
    waited: float = 0.0,
) -> int:
    """Commit each step's result whose lease still holds, in one transaction; how many were.

    A lease holds while it is ours and unexpired: a terminated or timed-out run, or a lease that
    lapsed (another worker may already run the step again), discards the result. Claims in
    `hand_back` were never started: their steps are released in the same transaction (after
    `waited` seconds), so another worker may take them at once.
    """
    committed = 0
    claims = [claim for claim, _ in results] + list(hand_back)
    if not claims:
        return 0
    with db.session() as session:
        begin_write(session)
        now = clock.now(session)
        query = select(Run).where(Run.id.in_(sorted({claim.run_pk for claim in claims})))
        runs = {run.id: run for run in session.scalars(for_update(session, query.order_by(Run.id)))}
        branch_pks = [claim.branch_pk for claim in claims if claim.branch_pk is not None]
        branches = {}
        if branch_pks:
            rows = session.scalars(select(RunBranch).where(RunBranch.id.in_(branch_pks)))
            branches = {branch.id: branch for branch in rows}

        def holding(claim: Claim) -> tuple[Run, Frame] | None:
            run = runs.get(claim.run_pk)
            frame: Frame | None = run if claim.branch_pk is None else branches.get(claim.branch_pk)
            if run is None or frame is None or not _lease_holds(run, frame, claim, now):
                log.info("discarding the result of %s: the lease is gone", claim.owner)
                return None
            return run, frame

        with events_together(session), finishing_together(session):
            # A run whose timeout is due takes no result: the timeout is applied instead.
            for run_pk, deadline in deadlines.overdue_run_timeouts(session, runs, now).items():
                deadlines.apply(session, deadline, runs[run_pk], now)
            for claim, outcome in results:
                held = holding(claim)
                if held is None:
                    continue
                run, frame = held
                frame.lease_owner = None
                frame.lease_expires_at = None
                # Actions saw the plaintext of secret inputs; none of it may reach history.
                if outcome.ok:
                    output = secrets.scrub(outcome.output, run.input)
                    complete_step(session, run, frame, now, output)
                else:
                    error = secrets.scrub(outcome.error or {}, run.input)
                    _fail_attempt(session, run, frame, now, claim, error)
                settle(session, run, layout_for(session, run))
                committed += 1
            for claim in hand_back:
                held = holding(claim)
                if held is not None:
                    release_unstarted(session, held[0], held[1], now, waited)
        session.commit()
    return committed


def _lease_holds(run: Run, frame: Frame, claim: Claim, now: datetime) -> bool:
    # In-flight actions still record their results while an incident suspends the run.
    if run.status not in ("running", "suspended") or frame.lease_owner != claim.owner:
        return False
    return frame.lease_expires_at is None or frame.lease_expires_at > now


def commit_outcome(db: Database, clock: Clock, claim: Claim, outcome: Outcome) -> bool:
    """Commit one step's result if the lease is still ours; False when it was discarded."""
    return commit_outcomes(db, clock, [(claim, outcome)]) == 1


def _fail_attempt(
    session: Session, run: Run, frame: Frame, now: datetime, claim: Claim, error: dict[str, Any]
) -> None:
    will_retry = frame.attempt < claim.max_attempts and run.cancel_requested_at is None
    payload: dict[str, Any] = {"attempt": frame.attempt, "error": error, "will_retry": will_retry}
    if will_retry:
        retry_at = now + timedelta(seconds=claim.backoff_seconds)
        payload["retry_at"] = format_utc_or_none(retry_at)
        frame.claimable_at = retry_at
    record(session, run, frame, now, "step_failed", payload, frame.current_step)
    if will_retry:
        return
    if run.cancel_requested_at is not None:
        frame.claimable_at = None
        stop_if_cancelled(session, run, now)
        return
    if definition_of(session, run).get("on_step_failure") == "incident":
        open_incident(session, run, frame, now, error)
        return
    step_error = {**error, "step": frame.current_step, "attempts": frame.attempt}
    fail_run(session, run, now, step_error, frame.current_step)


# Pauses (seconds) before committing a batch's results again when the database was away: a
# restart kills the pooled connections, and the first commit after it can meet one of them. The
# results are kept (the heartbeat holds their leases meanwhile) instead of lapsing and running
# the actions a second time.
COMMIT_RETRY_PAUSES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


def _commit_through_outages(
    db: Database,
    clock: Clock,
    settings: WorkerSettings,
    results: list[tuple[Claim, Outcome]],
    unstarted: list[Claim],
    took: float,
    monotonic: Callable[[], float],
) -> None:
    """`commit_outcomes`, tried again after an outage for up to half a lease.

    Trying again is safe: a result is applied only while its step's lease is still this
    worker's, so one whose first commit did land (the connection died on the answer to COMMIT)
    is not applied twice; a lease that lapsed meanwhile discards it, as any late result.
    """
    began = monotonic()
    for pause in (*COMMIT_RETRY_PAUSES, None):
        try:
            commit_outcomes(db, clock, results, hand_back=unstarted, waited=took)
            return
        except (OperationalError, InterfaceError) as exc:
            if pause is None or monotonic() - began + pause > settings.lease_seconds / 2:
                raise
            log_failure(log, "committing a batch's results failed, trying again", exc)
            time.sleep(pause)


def _commit_each(
    db: Database,
    clock: Clock,
    results: list[tuple[Claim, Outcome]],
    unstarted: list[Claim],
    took: float,
) -> None:
    """Commit a batch's results one by one after the database refused them together.

    A result the database refuses fails its step (`result_not_storable`, with the database's
    first line) instead of sinking the batch: before, every result of the batch was lost and
    each step ran again at the next lease, the refused one forever.
    """
    for claim, outcome in results:
        try:
            commit_outcomes(db, clock, [(claim, outcome)])
        except (DataError, IntegrityError) as exc:
            log_failure(log, f"the result of {claim.owner} could not be stored", exc)
            error = {"type": "result_not_storable", "message": storable(database_cause(exc))}
            commit_outcomes(db, clock, [(claim, Outcome(False, error=error))])
    if unstarted:
        commit_outcomes(db, clock, [], hand_back=unstarted, waited=took)


def work_once(
    db: Database,
    clock: Clock,
    settings: WorkerSettings,
    *,
    peek: bool = False,
    heartbeat: Heartbeat | None = None,
    size: ClaimSize | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    stopping: Callable[[], bool] | None = None,
) -> int:
    """Claim a batch, run its actions one after the other, commit their results; the steps
    advanced (0: idle).

    With a `heartbeat`, the leases of every claimed step are kept alive until its result is
    committed or it is handed back. Once the batch has run `settings.hand_back_after` seconds,
    no further action of it starts: the finished results are committed and the unstarted steps
    handed back in one transaction; so are they as soon as `stopping()` is true (the worker is
    shutting down: it finishes the step it is executing, not the whole batch). With a `size`,
    the claim takes `size.next()` steps and `size` learns from how long the batch took.
    """
    wanted = settings if size is None else replace(settings, batch=size.next(settings))
    batch = claim_batch(db, clock, wanted, peek=peek)
    if not batch.claims:
        return batch.advanced
    if heartbeat is not None:
        heartbeat.add(batch.claims)
    results: list[tuple[Claim, Outcome]] = []
    unstarted: list[Claim] = []
    try:
        began = monotonic()
        for index, claim in enumerate(batch.claims):
            late = monotonic() - began >= settings.hand_back_after
            if index and (late or (stopping is not None and stopping())):
                unstarted = batch.claims[index:]
                break
            results.append((claim, execute(claim)))
        took = monotonic() - began
        try:
            _commit_through_outages(db, clock, settings, results, unstarted, took, monotonic)
        except (DataError, IntegrityError) as exc:  # refused for its data: one result, maybe
            log_failure(log, "committing a batch's results failed; committing each alone", exc)
            _commit_each(db, clock, results, unstarted, took)
    finally:
        if heartbeat is not None:
            heartbeat.remove(batch.claims)
    if size is not None:
        size.learn(settings, took, bool(unstarted))
    return batch.advanced + len(results)
