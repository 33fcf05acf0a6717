"""Runs per namespace, hour of creation and state, kept as runs are written (the overview's chart).

The overview shows a namespace's runs of the last 24 hours by hour and outcome. Counting them
reads every run of the window (~143,000 in a namespace starting 1.6 runs a second); this table
holds the same counts, so the overview reads at most 24 × 6 × `STRIPES` small rows.

- `state` is a run's final status, or `active` for any of the active ones: moving between
  pending, running, waiting and suspended (every step of every run) changes no count, so only
  a run's creation and its end write here.
- Rows are striped by run id (`STRIPES`), so workers ending runs of the same hour at the same
  moment rarely wait for one another's row.

How it stays exact:
- ORM writes of runs (new runs, status changes, deletes) are seen after each flush, from the
  attributes' own history; Core inserts of runs say so with `record_inserted`, and a Core
  update of `runs.status` must call `record_status_changes` (tests/runs/test_rollup.py compares
  the rollup with the runs after every kind of start and end).
- Changes are kept per transaction and written once, at commit, by one upsert of increments in
  key order (`INSERT … ON CONFLICT DO UPDATE SET runs = runs + excluded.runs`): concurrent
  writers add to the same row without losing updates, take these row locks last and in one
  order (no deadlock among them), and hold them only for the commit.
- A savepoint rolled back drops what was recorded inside it; a transaction rolled back writes
  nothing. A failed flush records nothing (its rows were not written).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, ForeignKey, Integer, String, Table, event, text
from sqlalchemy.orm import Mapped, Session, SessionTransaction, mapped_column
from sqlalchemy.orm.attributes import PASSIVE_NO_INITIALIZE, get_history

from app.db.base import Base, UTCDateTime, upsert_insert
from app.db.runs import ACTIVE_RUN_STATUSES, Run

STRIPES = 8
ACTIVE = "active"
_PENDING = "almanac.run_rollup"

Key = tuple[int, datetime, str, int]


class RunRollup(Base):
    """How many runs of `namespace_id` created in `hour` are in `state` (one stripe of them)."""

    __tablename__ = "run_rollup"

    namespace_id: Mapped[int] = mapped_column(
        ForeignKey("namespaces.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True)
    runs: Mapped[int] = mapped_column(Integer)


def state_of(status: str) -> str:
    """The rollup's state for a run status: `active`, or the final status itself."""
    return ACTIVE if status in ACTIVE_RUN_STATUSES else status


def hour_of(instant: datetime) -> datetime:
    """The UTC hour `instant` falls in."""
    return instant.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _key(namespace_id: int, created_at: datetime, status: str, run_pk: int) -> Key:
    return (namespace_id, hour_of(created_at), state_of(status), run_pk % STRIPES)


def _record(session: Session, changes: Counter[Key]) -> None:
    changes = Counter({key: n for key, n in changes.items() if n})
    if changes:
        # Kept with the innermost transaction, so a savepoint's rollback can drop it.
        owner = session.get_nested_transaction() or session.get_transaction()
        session.info.setdefault(_PENDING, []).append((owner, changes))


def record_inserted(session: Session, runs: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
    """Count runs inserted without the ORM: (primary key, row with namespace_id, created_at,
    status) each."""
    changes: Counter[Key] = Counter()
    for pk, row in runs:
        changes[_key(row["namespace_id"], row["created_at"], row["status"], pk)] += 1
    _record(session, changes)


def record_status_changes(
    session: Session, runs: Iterable[tuple[int, int, datetime, str, str]]
) -> None:
    """Count status changes written without the ORM: (primary key, namespace_id, created_at,
    old status, new status) each. (ORM changes are seen without this.)"""
    changes: Counter[Key] = Counter()
    for pk, namespace_id, created_at, old, new in runs:
        changes[_key(namespace_id, created_at, old, pk)] -= 1
        changes[_key(namespace_id, created_at, new, pk)] += 1
    _record(session, changes)


# A no-op listener with active_history: setting a run's status loads the old value first when
# it was not loaded, so the flush below always knows which state the run leaves.
@event.listens_for(Run.status, "set", active_history=True)
def _load_old_status(target: Run, value: str, old: Any, initiator: Any) -> None:
    return None


@event.listens_for(Session, "after_flush")
def _track(session: Session, flush_context: Any) -> None:
    changes: Counter[Key] = Counter()
    for obj in session.new:
        if isinstance(obj, Run):
            changes[_key(obj.namespace_id, obj.created_at, obj.status or "pending", obj.id)] += 1
    for obj in session.dirty:
        if isinstance(obj, Run):
            history = get_history(obj, "status", PASSIVE_NO_INITIALIZE)
            if history.added and history.deleted and history.added[0] != history.deleted[0]:
                changes[_key(obj.namespace_id, obj.created_at, history.deleted[0], obj.id)] -= 1
                changes[_key(obj.namespace_id, obj.created_at, history.added[0], obj.id)] += 1
    for obj in session.deleted:
        if isinstance(obj, Run):
            history = get_history(obj, "status", PASSIVE_NO_INITIALIZE)
            status = (history.deleted or history.unchanged or [obj.status])[0]
            changes[_key(obj.namespace_id, obj.created_at, status, obj.id)] -= 1
    _record(session, changes)


def _inside(transaction: SessionTransaction | None, ancestor: SessionTransaction) -> bool:
    while transaction is not None:
        if transaction is ancestor:
            return True
        transaction = transaction.parent
    return False


@event.listens_for(Session, "after_soft_rollback")
def _forget_rolled_back(session: Session, previous: SessionTransaction) -> None:
    pending = session.info.get(_PENDING)
    if pending:
        session.info[_PENDING] = [(tx, c) for tx, c in pending if not _inside(tx, previous)]


@event.listens_for(Session, "after_transaction_end")
def _forget_at_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_PENDING, None)


@event.listens_for(Session, "before_commit")
def _write(session: Session) -> None:
    if session.get_nested_transaction() is not None:
        return  # a savepoint is released: its changes wait for the transaction's commit
    write_pending(session)


def write_pending(session: Session) -> None:
    """Write the counts this transaction changed so far, now instead of at its commit: a
    ticker page does, so that its last look at the clock comes after every lock it waits on."""
    session.flush()
    pending = session.info.pop(_PENDING, None)
    if not pending:
        return
    totals: Counter[Key] = Counter()
    for _, changes in pending:
        totals.update(changes)
    add(session.connection(), totals)


def add(conn: Connection, changes: Mapping[Key, int]) -> None:
    """Add `changes` to the counts: one statement, rows in key order."""
    rows = [
        {"namespace_id": k[0], "hour": k[1], "state": k[2], "stripe": k[3], "runs": n}
        for k, n in sorted(changes.items())
        if n
    ]
    if not rows:
        return
    table = cast(Table, RunRollup.__table__)
    insert = upsert_insert(conn.dialect.name)
    statement = insert(table).values(rows)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["namespace_id", "hour", "state", "stripe"],
            set_={"runs": table.c.runs + statement.excluded.runs},
        )
    )


# Hour truncation of a stored `created_at`, per dialect (SQLite keeps naive UTC text).
HOUR_SQL = {
    "postgresql": "date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
    "sqlite": "strftime('%Y-%m-%d %H:00:00.000000', created_at)",
}
STATE_SQL = "CASE WHEN status IN ({}) THEN '{}' ELSE status END".format(
    ", ".join(f"'{s}'" for s in ACTIVE_RUN_STATUSES), ACTIVE
)


def rebuild_sql(dialect: str, where: str = "") -> list[str]:
    """Statements that recount the rollup from the runs (all, or those matching `where`)."""
    hour = HOUR_SQL["postgresql" if dialect == "postgresql" else "sqlite"]
    scope = f" WHERE {where}" if where else ""
    return [
        f"DELETE FROM run_rollup{scope}",
        "INSERT INTO run_rollup (namespace_id, hour, state, stripe, runs) "
        f"SELECT namespace_id, {hour}, {STATE_SQL}, id % {STRIPES}, count(*) FROM runs{scope} "
        f"GROUP BY namespace_id, {hour}, {STATE_SQL}, id % {STRIPES}",
    ]


def rebuild(conn: Connection, namespace_id: int | None = None) -> None:
    """Recount the rollup from the runs (after loading runs in bulk, e.g. a benchmark)."""
    where = "" if namespace_id is None else f"namespace_id = {int(namespace_id)}"
    for sql in rebuild_sql(conn.dialect.name, where):
        conn.execute(text(sql))
