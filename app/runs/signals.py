"""Signals sent to runs: delivered, buffered for a later step, or ignored.

A signal is accepted at the clock's `now`. It wins only when accepted strictly before the deadline
of the step it is for — even if the scanner has not yet applied that deadline. Signals that arrive
before their step are kept and consumed in arrival order when the step is reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.calendar import format_utc_or_none
from app.db import Namespace, new_uid
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, RunHistoryEvent, Signal
from app.errors import ValidationFailed
from app.runs.deadlines import refuse_after_run_timeout
from app.runs.definitions import STEP_ID_RE
from app.runs.errors import RunFinished
from app.runs.frames import frame_of_node, is_waiting_at, settle
from app.runs.layout import ROOT, Layout, Node, branch_path
from app.runs.lifecycle import append_event
from app.runs.locking import begin_write
from app.runs.service import check_size, get_run
from app.runs.steps import deliver_signal, layout_for


@dataclass(frozen=True)
class SignalOutcome:
    """The answer to a sender: `delivered`, `buffered` or `ignored` (with a reason)."""

    signal: Signal
    status: str
    reason: str | None = None


def send(
    session: Session, now: datetime, namespace: Namespace, run_id: str, name: str, payload: Any
) -> SignalOutcome:
    """Accept signal `name` for the run at `now`; the caller commits. 409 on a finished run."""
    if not STEP_ID_RE.fullmatch(name):
        raise ValidationFailed(
            [
                {
                    "loc": ["name"],
                    "msg": "must be a signal name of 1-128 letters, digits, '.', '_', ':' or '-'",
                }
            ]
        )
    check_size("payload", payload)
    begin_write(session)
    run = get_run(session, namespace, run_id, lock=True)
    if run.status not in ACTIVE_RUN_STATUSES:
        raise RunFinished(run.run_id, run.status)
    refuse_after_run_timeout(session, run, now)
    position = (
        session.scalar(select(func.max(Signal.position)).where(Signal.run_pk == run.id)) or 0
    ) + 1
    signal = Signal(
        id=new_uid(),
        run_pk=run.id,
        name=name,
        payload=payload,
        accepted_at=now,
        status="buffered",
        position=position,
    )
    session.add(signal)
    layout = layout_for(session, run)
    outcome = _route(session, run, layout, signal, now)
    settle(session, run, layout)
    return outcome


def _route(
    session: Session, run: Run, layout: Layout, signal: Signal, now: datetime
) -> SignalOutcome:
    """Deliver to a step waiting for it, keep it for one not reached yet, or ignore it.

    The signal goes where it would go had the scanner already applied every deadline due at
    `now`, so how late the ticker runs never decides where it lands. A waiting step whose
    deadline has passed no longer waits: one anywhere in the run that fails it at its timeout
    makes the signal too late; one that continues (or, in a suspended run, whose failure is
    held) is passed over; and a step the scan would enter at once (after a due wait or a
    continuing timeout) takes the signal on entry, in definition order like those waiting."""
    failing = _failing_timeout_due(session, run, layout, now)
    if failing is not None:
        # The scan would fail the run now: no step takes the signal any more.
        failing_step, failing_at = failing
        return _ignore(session, run, layout, signal, now, "too_late", failing_at, failing_step)
    named = [
        node
        for node in layout.nodes.values()
        if node.step["type"] == "signal" and node.step["signal"] == signal.name
    ]
    # The first step passed over at its deadline: the one a too-late signal was for.
    late: tuple[str, datetime] | None = None
    for node in named:
        frame = frame_of_node(session, run, layout, node.step["id"])
        if frame is None or not is_waiting_at(frame, node.step["id"], node.step):
            if _entered_by_the_scan(session, run, layout, node, now):
                return SignalOutcome(signal, "buffered")
            continue
        deadline = _open_deadline(session, run, node.step["id"])
        due = deadline.due_at if deadline is not None else None
        # Strictly before: a signal accepted exactly at the deadline is too late. This holds
        # during an incident too: a signal in time wins and its continuation is held.
        if due is None or now < due:
            if deadline is not None:
                deadline.consumed_at = now
            deliver_signal(session, run, frame, node.step, signal, now, due)
            return SignalOutcome(signal, "delivered")
        # Past its deadline: it continues, or (a suspended run) the scan holds its failure.
        late = late or (node.step["id"], due)
    passed = [node.step["id"] for node in named]
    entered = _entered(session, run, passed)
    if any(node_id not in entered for node_id in passed):
        return SignalOutcome(signal, "buffered")
    # Every step of that name is behind the run: too late after the last deadline issued to
    # one of them (whether the scan has timed it out yet or not), else not expected.
    late = late or _last_deadline_passed(session, run, passed, now)
    if late is not None:
        node_id, due = late
        return _ignore(session, run, layout, signal, now, "too_late", due, node_id)
    last = passed[-1] if passed else None
    return _ignore(session, run, layout, signal, now, "not_expected", None, last)


def _failing_timeout_due(
    session: Session, run: Run, layout: Layout, now: datetime
) -> tuple[str, datetime] | None:
    """The first signal or task step, anywhere in the run, still waiting past a deadline due at
    `now` whose timeout fails the run (`on_timeout: fail`), with that deadline. None in a
    suspended run, where the scan holds such a failure until the incident is resolved."""
    if run.status == "suspended":
        return None
    due = session.execute(
        select(Deadline.node_id, Deadline.due_at)
        .where(
            Deadline.run_pk == run.id,
            Deadline.kind.in_(("signal", "task")),
            Deadline.consumed_at.is_(None),
            Deadline.due_at <= now,
        )
        .order_by(Deadline.due_at, Deadline.node_id)
    ).all()
    for node_id, due_at in due:
        node = layout.nodes.get(node_id or "")
        if node is None or node.step.get("on_timeout", "fail") != "fail":
            continue
        frame = frame_of_node(session, run, layout, node.step["id"])
        if frame is not None and is_waiting_at(frame, node.step["id"], node.step):
            return node.step["id"], due_at
    return None


def _entered_by_the_scan(
    session: Session, run: Run, layout: Layout, node: Node, now: datetime
) -> bool:
    """Whether a scan at `now` would enter step `node`: the step before it in its sequence
    waits on a deadline already due that moves the sequence on (a wait, or a signal or task
    timeout that continues), or it opens a branch the scan would start at once (its parallel
    step entered so, the branch within `max_concurrency`). In a suspended run the scan holds
    what follows instead."""
    if run.status == "suspended" or node.path == ROOT and node.index == 0:
        return False
    if node.index == 0:
        parallel_id, branch_id = node.path.split("/")[-2:]
        parallel = layout.nodes[parallel_id]
        branches = [branch["id"] for branch in parallel.step["branches"]]
        started_at_once = parallel.step.get("max_concurrency", len(branches))
        return branches.index(branch_id) < started_at_once and _entered_by_the_scan(
            session, run, layout, parallel, now
        )
    before = layout.sequences[node.path][node.index - 1]
    if before["type"] not in ("wait", "signal", "task"):
        return False
    if before["type"] != "wait" and before.get("on_timeout", "fail") != "continue":
        return False
    frame = frame_of_node(session, run, layout, before["id"])
    if frame is None or not is_waiting_at(frame, before["id"], before):
        return False
    due = session.scalar(
        select(func.min(Deadline.due_at)).where(
            Deadline.run_pk == run.id,
            Deadline.node_id == before["id"],
            Deadline.kind != "run_timeout",
            Deadline.consumed_at.is_(None),
        )
    )
    return due is not None and due <= now


def _entered(session: Session, run: Run, node_ids: list[str]) -> set[str]:
    """Which of these steps the run has reached (their `step_started` is in its history)."""
    if not node_ids:
        return set()
    query = select(RunHistoryEvent.node_id).where(
        RunHistoryEvent.run_pk == run.id,
        RunHistoryEvent.event_type == "step_started",
        RunHistoryEvent.node_id.in_(node_ids),
    )
    return {node_id for node_id in session.scalars(query.distinct()) if node_id}


def _open_deadline(session: Session, run: Run, node_id: str) -> Deadline | None:
    """The unconsumed timeout of the signal step `node_id` (none without `timeout_seconds`)."""
    return session.scalar(
        select(Deadline).where(
            Deadline.run_pk == run.id,
            Deadline.kind == "signal",
            Deadline.node_id == node_id,
            Deadline.consumed_at.is_(None),
        )
    )


def _last_deadline_passed(
    session: Session, run: Run, node_ids: list[str], now: datetime
) -> tuple[str, datetime] | None:
    """The signal step among `node_ids` issued the latest deadline, with it, if that has passed."""
    last = session.execute(
        select(Deadline.node_id, Deadline.due_at)
        .where(Deadline.run_pk == run.id, Deadline.kind == "signal", Deadline.node_id.in_(node_ids))
        .order_by(Deadline.due_at.desc(), Deadline.id.desc())
        .limit(1)
    ).first()
    if last is None or last.node_id is None or now < last.due_at:
        return None
    return last.node_id, last.due_at


def _ignore(
    session: Session,
    run: Run,
    layout: Layout,
    signal: Signal,
    now: datetime,
    reason: str,
    deadline: datetime | None,
    node_id: str | None,
) -> SignalOutcome:
    """Record the signal as ignored, like `signal_received` records one delivered: with its
    payload, the deadline of the step it was too late for, and that step's branch."""
    signal.status = "ignored"
    signal.reason = reason
    signal.node_id = node_id
    payload = {
        "signal_id": signal.id,
        "signal": signal.name,
        "payload": signal.payload,
        "accepted_at": format_utc_or_none(signal.accepted_at),
        "deadline": format_utc_or_none(deadline),
        "reason": reason,
    }
    node = layout.nodes.get(node_id or "")
    path = branch_path(node.path) if node is not None else None
    append_event(session, run, now, "signal_ignored", payload, node_id, path)
    return SignalOutcome(signal, "ignored", reason)
