"""The tick's store: due schedules claimed as plain rows with Core, written back in bulk.

A `ScheduleRow` has the attributes of `app.db.Schedule`, so the ledger and policy functions
take either; the tick avoids the ORM's per-object bookkeeping for thousands of firings a second.
A page is claimed with `FOR UPDATE SKIP LOCKED` on PostgreSQL (replicas take different pages).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, Connection, Select, Table, Text, distinct, select, tuple_, type_coerce
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from app.db import Schedule, UTCDateTime
from app.db.bulk import Statement, update_rows, update_statement

TABLE = cast(Table, Schedule.__table__)
# The columns a firing may change; configuration columns never change in a tick.
MUTABLE = (
    "status",
    "blocked_reason",
    "cursor_at",
    "next_occurrence",
    "next_fire_at",
    "pending_occurrence",
    "pending_until",
    "fires_count",
    "remaining_runs",
    "skipped_trigger_count",
    "last_skip_reason",
    "last_skipped_at",
    "buffered_count",
    "last_fired_at",
    "latest_run_id",
    "history_sequence",
    "deleted_at",
    # A block or a delete is a new revision (its row is written with the page's other rows).
    "revision",
    "updated_at",
)
# What a firing reads: everything but bookkeeping it never looks at (the notes are in the
# revision row a block or a delete writes).
COLUMNS = [column for column in TABLE.columns if column.name not in ("workflow_name", "created_at")]
_INSTANTS = frozenset(c.name for c in COLUMNS if isinstance(c.type, UTCDateTime))
_DOCUMENTS = frozenset(c.name for c in COLUMNS if isinstance(c.type, JSON))


class ScheduleRow:
    """One schedule's columns as attributes, remembering what was loaded."""

    # The attributes the tick's own code reads; the rest are read through `Schedule` typing.
    id: int
    namespace_id: int
    next_fire_at: datetime | None

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
        self._loaded = {name: values[name] for name in MUTABLE}

    def changes(self) -> dict[str, Any]:
        now, loaded = self.__dict__, self._loaded
        return {name: now[name] for name in MUTABLE if now[name] != loaded[name]}


def due_namespaces(session: Session, now: datetime, among: Sequence[int] = ()) -> list[int]:
    """The ids of namespaces (of `among`, when given) with an active schedule due at `now`,
    in id order."""
    query = select(distinct(TABLE.c.namespace_id)).where(
        TABLE.c.status == "active", TABLE.c.next_fire_at <= now
    )
    if among:
        query = query.where(TABLE.c.namespace_id.in_(among))
    return sorted(session.scalars(query))


def claim(
    session: Session,
    now: datetime,
    limit: int,
    *,
    namespace_id: int | None = None,
    key: tuple[datetime, int] | None = None,
    pk: int | None = None,
) -> list[ScheduleRow]:
    """Lock and load due schedules in `(next_fire_at, id)` order after `key`, skipping locked."""
    query = select(*selectable()).where(TABLE.c.status == "active", TABLE.c.next_fire_at <= now)
    if namespace_id is not None:
        query = query.where(TABLE.c.namespace_id == namespace_id)
    if pk is not None:
        query = query.where(TABLE.c.id == pk)
    if key is not None:
        query = query.where(tuple_(TABLE.c.next_fire_at, TABLE.c.id) > key)
    query = query.order_by(TABLE.c.next_fire_at, TABLE.c.id).limit(limit)
    return load(session.connection(), query.with_for_update(skip_locked=True))


def selectable() -> list[Any]:
    """The columns to select, instants and JSON left raw: `load` converts them, once each
    distinct value (a page of due schedules repeats the same instants and specs)."""
    return [
        sql_cast(column, Text).label(column.name)
        if isinstance(column.type, JSON)
        else type_coerce(column, Text).label(column.name)
        if isinstance(column.type, UTCDateTime)
        else column
        for column in COLUMNS
    ]


def load(conn: Connection, query: Select[Any]) -> list[ScheduleRow]:
    """Rows of a `select(*selectable())` query, converted column by column: each distinct
    instant or JSON text once (a page of due schedules repeats the same few)."""
    result = conn.execute(query)
    names = list(result.keys())
    rows = result.all()
    if not rows:
        return []
    columns: list[Any] = list(zip(*rows, strict=True))
    for index, name in enumerate(names):
        if name in _INSTANTS:
            columns[index] = _each_once(columns[index], _instant_or_none)
        elif name in _DOCUMENTS:
            # Shared between rows with the same text: the tick only reads configuration.
            columns[index] = _each_once(columns[index], _document)
    return [
        ScheduleRow(dict(zip(names, values, strict=True))) for values in zip(*columns, strict=True)
    ]


def _each_once(column: Sequence[Any], convert: Callable[[Any], Any]) -> list[Any]:
    converted = {raw: convert(raw) for raw in set(column)}
    return list(map(converted.__getitem__, column))


def _instant_or_none(raw: Any) -> datetime | None:
    return None if raw is None else _instant(raw)


def _document(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


def _instant(raw: Any) -> datetime:
    if isinstance(raw, str):
        return datetime.fromisoformat(raw).replace(tzinfo=UTC)
    return raw.astimezone(UTC)  # type: ignore[no-any-return]


def save(conn: Connection, rows: Sequence[ScheduleRow]) -> None:
    """Write back what changed, one bulk update per set of changed columns."""
    for group in _changed(rows):
        update_rows(conn, TABLE, group)


def save_statements(dialect: Dialect, rows: Sequence[ScheduleRow]) -> list[Statement]:
    """PostgreSQL: the statements `save` would send, built now for another thread to send."""
    return [update_statement(dialect, TABLE, group) for group in _changed(rows)]


def _changed(rows: Sequence[ScheduleRow]) -> list[list[dict[str, Any]]]:
    """What changed, grouped by the set of changed columns (one update per group)."""
    groups: defaultdict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        changes = row.changes()
        if changes:
            groups[tuple(changes)].append({"id": row.id, **changes})
    return list(groups.values())
