"""Leases on the steps workers execute: recovering expired ones, and keeping live ones alive.

A worker's lease on a step lasts `lease_seconds`. While the action runs, the worker's heartbeat
extends the lease about every third of that, so a long action is never taken over while its
worker lives; once the worker dies (or stops beating), the lease expires and the tick, or the
next claim, releases it and the step runs again.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Database
from app.db.runs import Run, RunBranch
from app.db.session import log_failure
from app.runs.claims import Claim, Clock
from app.runs.frames import Frame, settle
from app.runs.locking import begin_write, for_update
from app.runs.steps import layout_for, stop_if_cancelled
from app.runs.waiting import record

log = logging.getLogger(__name__)


def locked_branches(session: Session, query: Any) -> Any:
    """Branch rows are written under their run's lock: lock (and skip) the runs, not them."""
    if session.get_bind().dialect.name == "sqlite":
        return query
    return query.with_for_update(of=Run, skip_locked=True)


def release_expired_lease(session: Session, run: Run, frame: Frame, now: datetime) -> None:
    """Record that the worker holding `frame`'s step lost its lease; the same attempt runs again."""
    expired = format_utc_or_none(frame.lease_expires_at)
    message = f"worker {frame.lease_owner} did not finish before {expired}"
    _release(session, run, frame, now, {"type": "lease_expired", "message": message})


def release_unstarted(
    session: Session, run: Run, frame: Frame, now: datetime, waited: float
) -> None:
    """The worker holding `frame`'s step gives it back unstarted (its batch ran long): the same
    attempt is claimable again at once, by any worker."""
    message = f"worker {frame.lease_owner} handed it back unstarted after {waited:.1f} s"
    _release(session, run, frame, now, {"type": "handed_back", "message": message})


def _release(
    session: Session, run: Run, frame: Frame, now: datetime, error: dict[str, str]
) -> None:
    payload = {"attempt": frame.attempt, "will_retry": True, "error": error}
    record(session, run, frame, now, "step_failed", payload, frame.current_step)
    frame.attempt = max(frame.attempt - 1, 0)
    frame.lease_owner = None
    frame.lease_expires_at = None
    frame.claimable_at = now
    if run.cancel_requested_at is not None:
        frame.claimable_at = None
        stop_if_cancelled(session, run, now)
    settle(session, run, layout_for(session, run))


def recover_expired_leases(session: Session, now: datetime, limit: int) -> int:
    """Release up to `limit` expired leases (root steps, then branch steps); how many."""
    query = (
        select(Run)
        .where(Run.lease_expires_at <= now, Run.lease_owner.is_not(None))
        .order_by(Run.id)
        .limit(limit)
    )
    runs = list(session.scalars(for_update(session, query, skip_locked=True)))
    for run in runs:
        release_expired_lease(session, run, run, now)
    branches = (
        select(RunBranch, Run)
        .join(Run, Run.id == RunBranch.run_pk)
        .where(RunBranch.lease_expires_at <= now, RunBranch.lease_owner.is_not(None))
        .order_by(RunBranch.run_pk, RunBranch.id)
        .limit(limit)
    )
    rows = session.execute(locked_branches(session, branches)).all()
    if rows and session.get_bind().dialect.name != "sqlite":
        # Only the runs are locked: re-read the branches under those locks (a heartbeat or a
        # commit may have changed them just before), as claims do.
        again = select(RunBranch).where(RunBranch.id.in_([row[0].id for row in rows]))
        session.scalars(again.execution_options(populate_existing=True)).all()
    for branch, run in rows:
        expires = branch.lease_expires_at
        if branch.lease_owner is not None and expires is not None and expires <= now:
            release_expired_lease(session, run, branch, now)
    return max(len(runs), len(rows))


def extend_leases(db: Database, clock: Clock, claims: list[Claim], lease_seconds: float) -> int:
    """Push the leases of steps still being executed forward; how many were still ours."""
    extended = 0
    with db.session() as session:
        begin_write(session)
        now = clock.now(session)
        expires = now + timedelta(seconds=lease_seconds)
        # Lock the runs first, in id order, like every other writer of runs and branches.
        pks = sorted({claim.run_pk for claim in claims})
        session.execute(for_update(session, select(Run.id).where(Run.id.in_(pks)).order_by(Run.id)))
        for claim in sorted(claims, key=lambda c: (c.run_pk, c.branch_pk or 0)):
            table: Any = Run if claim.branch_pk is None else RunBranch
            pk = claim.run_pk if claim.branch_pk is None else claim.branch_pk
            result = session.execute(
                update(table)
                .where(table.id == pk, table.lease_owner == claim.owner)
                .values(lease_expires_at=expires)
            )
            extended += result.rowcount  # type: ignore[attr-defined]
        session.commit()
    return extended


class Heartbeat:
    """One thread extending the leases of every step its workers are executing.

    It wakes every `lease_seconds / 3`; claims are added before their actions run and removed
    once their results are committed (or discarded).
    """

    def __init__(self, db: Database, clock: Clock, lease_seconds: float) -> None:
        self.db = db
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.interval = lease_seconds / 3
        self._claims: dict[str, Claim] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, claims: list[Claim]) -> None:
        with self._lock:
            for claim in claims:
                self._claims[claim.owner] = claim
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(
                    target=self._loop, name="almanac-lease-heartbeat", daemon=True
                )
                self._thread.start()

    def remove(self, claims: list[Claim]) -> None:
        with self._lock:
            for claim in claims:
                self._claims.pop(claim.owner, None)

    def beat(self) -> int:
        """Extend every held lease now; how many were still ours."""
        with self._lock:
            claims = list(self._claims.values())
        if not claims:
            return 0
        return extend_leases(self.db, self.clock, claims, self.lease_seconds)

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                self.beat()
            except Exception as exc:  # a database hiccup: the next beat tries again, in time
                log_failure(log, "lease heartbeat failed", exc)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
