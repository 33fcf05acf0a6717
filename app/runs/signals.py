"""Signals sent to runs (SPEC §6.3): delivered, buffered for a later step, or ignored.

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

from app.db import Namespace, new_uid
from app.db.runs import ACTIVE_RUN_STATUSES, Deadline, Run, Signal
from app.errors import ValidationFailed
from app.runs.definitions import STEP_ID_RE
from app.runs.errors import RunFinished
from app.runs.lifecycle import append_event
from app.runs.locking import begin_write
from app.runs.service import check_size, get_run
from app.runs.steps import definition_of, deliver_signal, iso


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
    steps = definition_of(session, run)["steps"]
    step = steps[run.step_index] if run.step_index < len(steps) else None
    if (
        run.status == "waiting"
        and step is not None
        and step["type"] == "signal"
        and step["signal"] == name
    ):
        return _to_waiting_step(session, run, step, signal, now)
    first_future = run.step_index + 1 if run.status == "waiting" else run.step_index
    if any(s["type"] == "signal" and s["signal"] == name for s in steps[first_future:]):
        return SignalOutcome(signal, "buffered")
    passed = [
        s["id"] for s in steps[:first_future] if s["type"] == "signal" and s["signal"] == name
    ]
    reason = (
        "too_late" if passed and _deadline_passed(session, run, passed, now) else "not_expected"
    )
    return _ignore(session, run, signal, now, reason, None, passed[-1] if passed else None)


def _to_waiting_step(
    session: Session, run: Run, step: dict[str, Any], signal: Signal, now: datetime
) -> SignalOutcome:
    deadline = session.scalar(
        select(Deadline).where(
            Deadline.run_pk == run.id,
            Deadline.kind == "signal",
            Deadline.node_id == step["id"],
            Deadline.consumed_at.is_(None),
        )
    )
    due = deadline.due_at if deadline is not None else None
    # Strictly before: a signal accepted exactly at the deadline is too late (SPEC §6.3).
    if due is not None and now >= due:
        return _ignore(session, run, signal, now, "too_late", due, step["id"])
    if deadline is not None:
        deadline.consumed_at = now
    deliver_signal(session, run, step, signal, now, due)
    return SignalOutcome(signal, "delivered")


def _deadline_passed(session: Session, run: Run, node_ids: list[str], now: datetime) -> bool:
    due = session.scalar(
        select(func.max(Deadline.due_at)).where(
            Deadline.run_pk == run.id, Deadline.kind == "signal", Deadline.node_id.in_(node_ids)
        )
    )
    return due is not None and now >= due


def _ignore(
    session: Session,
    run: Run,
    signal: Signal,
    now: datetime,
    reason: str,
    deadline: datetime | None,
    node_id: str | None,
) -> SignalOutcome:
    signal.status = "ignored"
    signal.reason = reason
    signal.node_id = node_id
    append_event(
        session,
        run,
        now,
        "signal_ignored",
        {
            "signal_id": signal.id,
            "signal": signal.name,
            "accepted_at": iso(signal.accepted_at),
            "deadline": iso(deadline),
            "reason": reason,
        },
        node_id,
    )
    return SignalOutcome(signal, "ignored", reason)
