"""Announcing claimable work: `NOTIFY almanac_work` when a transaction that made a step
claimable commits (PostgreSQL; SQLite has no notifications).

A transaction makes work claimable when it starts a run, elapses a wait, delivers a signal or
a task, or finishes a step whose next one is ready. ORM changes are noticed by the hooks here
(a run or branch whose `claimable_at` was set); Core inserts of runs call `work_ready`.
PostgreSQL delivers a notice only if the transaction commits, and folds a transaction's
identical notices into one. Worker pools listen (app/runs/wakeup.py).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import PASSIVE_NO_INITIALIZE, get_history

from app.db.runs import Run, RunBranch

CHANNEL = "almanac_work"
_READY = "almanac.work_ready"


def announce(conn: Connection) -> None:
    """Wake listening workers when this transaction commits (nothing on SQLite)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"NOTIFY {CHANNEL}")


def work_ready(session: Session) -> None:
    """Announce at commit: this transaction made work claimable outside the ORM."""
    session.info[_READY] = True


@event.listens_for(Session, "after_flush")
def _note_claimable(session: Session, flush_context: Any) -> None:
    """Remember whether this transaction made a run or branch claimable."""
    if session.info.get(_READY):
        return
    new = session.new  # built afresh on each access: once per flush, not once per object
    for obj in (*new, *session.dirty):
        if isinstance(obj, Run | RunBranch) and obj.claimable_at is not None:
            if obj in new or get_history(obj, "claimable_at", PASSIVE_NO_INITIALIZE).added:
                session.info[_READY] = True
                return


@event.listens_for(Session, "before_commit")
def _announce_at_commit(session: Session) -> None:
    if session.get_nested_transaction() is not None:
        return
    session.flush()
    if session.info.pop(_READY, False):
        announce(session.connection())


@event.listens_for(Session, "after_transaction_end")
def _forget(session: Session, transaction: Any) -> None:
    if transaction.parent is None:
        session.info.pop(_READY, None)
