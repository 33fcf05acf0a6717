"""Incidents: an action step out of retries suspends its run instead of failing it.

While any incident of a run is open (the barrier), no new step starts anywhere in it: claims skip
suspended runs, and a step that finishes meanwhile (an action already executing, an elapsed wait,
a delivered signal, a timeout) records its result but holds what follows. Resolving the last open
incident applies the chosen action (`retry`, `skip`, `fail`), then releases the held
continuations in deadline order, and stores the recovery report on the incident.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import Namespace
from app.db.base import new_sortable_uid
from app.db.runs import ACTIVE_RUN_STATUSES, Run, RunBranch, RunIncident
from app.errors import Conflict, NotFound, ValidationFailed
from app.paging import newest_first, split_page
from app.runs import lifecycle
from app.runs.deadlines import refuse_after_run_timeout
from app.runs.frames import Frame, branch_path_of, branches_of, frame_of_node, settle
from app.runs.locking import begin_write
from app.runs.service import check_size, get_run
from app.runs.steps import advance, complete_step, fail_run, held_order, layout_for
from app.runs.waiting import record

ACTIONS = ("retry", "skip", "fail")
STATUSES = ("open", "resolved")


class IncidentNotFound(NotFound):
    def __init__(self, incident_id: str) -> None:
        super().__init__(f"incident {incident_id!r} does not exist", incident_id=incident_id)


class IncidentResolved(Conflict):
    def __init__(self, incident: RunIncident) -> None:
        super().__init__(
            f"incident {incident.id!r} is already resolved ({incident.resolution})",
            incident_id=incident.id,
            resolution=incident.resolution,
        )


class RunCancelling(Conflict):
    def __init__(self, run_id: str, incident_id: str) -> None:
        super().__init__(
            f"run {run_id!r} is being cancelled: no step of it starts again, and its open "
            "incidents are resolved 'run_cancelled' when it ends (terminate ends it now)",
            incident_id=incident_id,
            reason="cancel_requested",
        )


def open_incident(
    session: Session, run: Run, frame: Frame, now: datetime, error: dict[str, Any]
) -> RunIncident:
    """Suspend the run at `frame`'s failed step (its run row is locked by the caller)."""
    incident = RunIncident(
        id=new_sortable_uid(),
        run_pk=run.id,
        namespace_id=run.namespace_id,
        node_id=frame.current_step or "",
        branch_path=branch_path_of(frame),
        error=error,
        attempts=frame.attempt,
        opened_at=now,
    )
    session.add(incident)
    frame.claimable_at = None
    run.status = "suspended"
    payload = {"incident_id": incident.id, "error": error, "attempts": frame.attempt}
    record(session, run, frame, now, "incident_opened", payload, incident.node_id)
    return incident


def resolve(
    session: Session,
    now: datetime,
    namespace: Namespace,
    run_id: str,
    incident_id: str,
    action: str,
    output: Any = None,
    by: lifecycle.Actor = None,
) -> tuple[RunIncident, Run]:
    """Resolve an open incident with `action`; the caller checked run.manage and commits. `by`
    is who asked (its `command_context`, recorded in `incident_resolved`)."""
    if output is not None and action != "skip":
        # Taken and dropped, it read as if a retry or a fail had used it.
        msg = "only 'skip' takes an output (it completes the step with it)"
        raise ValidationFailed([{"loc": ["output"], "msg": msg}])
    check_size("output", output)
    begin_write(session)
    run = get_run(session, namespace, run_id, lock=True)
    incident = session.get(RunIncident, incident_id)
    if incident is None or incident.run_pk != run.id:
        raise IncidentNotFound(incident_id)
    session.refresh(incident)
    if incident.resolved_at is not None or run.status not in ACTIVE_RUN_STATUSES:
        raise IncidentResolved(incident)
    if run.cancel_requested_at is not None:
        # The run is ending: no step starts again, and its end resolves the incident.
        raise RunCancelling(run.run_id, incident.id)
    # The run's timeout wins over a resolution that comes after it, applied or not yet.
    refuse_after_run_timeout(session, run, now)
    incident.resolved_at = now
    incident.resolution = action
    still_open = _open_count(session, run)
    held = [] if still_open else _released(_held(session, run), action)
    incident.report = report_of(held)
    frame = frame_of_node(session, run, layout_for(session, run), incident.node_id)
    assert frame is not None
    payload = {"incident_id": incident.id, "action": action, "report": incident.report}
    if action == "skip":
        payload["output"] = output
    payload = lifecycle.asked(payload, by)
    record(session, run, frame, now, "incident_resolved", payload, incident.node_id)
    if not still_open:
        run.status = "running"
    _apply(session, run, frame, incident, action, output, now)
    _release(session, run, held, now)
    settle(session, run, layout_for(session, run))
    return incident, run


def _open_count(session: Session, run: Run) -> int:
    query = select(func.count()).where(
        RunIncident.run_pk == run.id, RunIncident.resolved_at.is_(None)
    )
    return session.scalar(query) or 0


def _held(session: Session, run: Run) -> list[RunBranch]:
    return [branch for branch in branches_of(session, run) if branch.held]


def _released(held: list[RunBranch], action: str) -> list[RunBranch]:
    """The held continuations this resolution lets go, in release order: none when it fails
    the run; else each in turn, up to one that fails the run (a held timeout)."""
    if action == "fail":
        return []
    released = []
    for branch in sorted(held, key=lambda b: held_order(b.held or {})):
        released.append(branch)
        if (branch.held or {}).get("kind") == "fail":
            break
    return released


def report_of(held: list[RunBranch]) -> dict[str, int]:
    """The recovery report: continuations released, elapsed waits and timeouts among them."""
    reasons = [(branch.held or {}).get("reason") for branch in held]
    return {
        "held_continuations": len(held),
        "elapsed_waits": reasons.count("wait"),
        "timeouts": reasons.count("timeout"),
    }


def _apply(
    session: Session,
    run: Run,
    frame: Frame,
    incident: RunIncident,
    action: str,
    output: Any,
    now: datetime,
) -> None:
    if action == "retry":
        # From attempt 1 again: the next claim records attempt 1.
        frame.attempt = 0
        frame.claimable_at = now
    elif action == "skip":
        complete_step(session, run, frame, now, output)
    else:
        error = {
            **incident.error,
            "step": incident.node_id,
            "attempts": incident.attempts,
            "incident_id": incident.id,
        }
        fail_run(session, run, now, error, incident.node_id)


def _release(session: Session, run: Run, held: list[RunBranch], now: datetime) -> None:
    """Let the held continuations go, in order, while the run is still active."""
    for branch in held:
        if run.status not in ACTIVE_RUN_STATUSES:
            return
        continuation = branch.held or {}
        branch.held = None
        if continuation["kind"] == "fail":
            fail_run(session, run, now, continuation["error"], continuation["node_id"])
        else:
            advance(session, run, branch, now)


def runs_being_cancelled(session: Session, incidents: list[RunIncident]) -> set[int]:
    """The runs (by primary key) among these incidents' that a cancel was asked for: their
    end resolves the incidents, and a resolution is refused meanwhile."""
    pks = {incident.run_pk for incident in incidents if incident.resolved_at is None}
    if not pks:
        return set()
    query = select(Run.id).where(Run.id.in_(pks), Run.cancel_requested_at.is_not(None))
    return set(session.scalars(query))


def list_incidents(
    session: Session,
    namespace: Namespace,
    limit: int,
    after: list[Any] | None,
    *,
    status: str | None = None,
    run: Run | None = None,
) -> tuple[list[tuple[RunIncident, str]], list[Any] | None]:
    """Incidents newest first with their run's id, one keyset page."""
    query = (
        select(RunIncident, Run.run_id)
        .join(Run, Run.id == RunIncident.run_pk)
        .where(RunIncident.namespace_id == namespace.id)
    )
    if status == "open":
        query = query.where(RunIncident.resolved_at.is_(None))
    elif status == "resolved":
        query = query.where(RunIncident.resolved_at.is_not(None))
    if run is not None:
        query = query.where(RunIncident.run_pk == run.id)
    query = newest_first(query, RunIncident.opened_at, RunIncident.id, after, limit)
    rows = [(row[0], row[1]) for row in session.execute(query)]
    return split_page(rows, limit, lambda row: [row[0].opened_at.isoformat(), row[0].id])
