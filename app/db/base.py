"""Declarative base, the naming convention Alembic relies on, and column types."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python (`timestamptz` on PostgreSQL)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        # SQLite keeps text: store naive UTC so lexical order is time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# JSONB on PostgreSQL (indexable, compact); plain JSON text elsewhere.
JSONType = JSON().with_variant(JSONB(), "postgresql")


def upsert_insert(dialect: str) -> Any:
    """The `insert` of the database named `dialect` ("postgresql" or "sqlite"): both take
    `on_conflict_do_nothing` / `on_conflict_do_update`, which plain `insert` lacks."""
    return pg_insert if dialect == "postgresql" else sqlite_insert


def new_uid() -> str:
    """Return a fresh random identifier for rows that need a stable public id."""
    return str(uuid.uuid4())


_sortable_lock = threading.Lock()
_sortable_last = [0, 0]  # the last id's millisecond and its counter within that millisecond


def new_sortable_uid() -> str:
    """A fresh identifier that sorts (as text) in the order this process made them: a version 7
    UUID, the Unix millisecond, then a counter within the millisecond, then random bits.

    Lists that show rows newest first by a time the manual clock or one transaction gives to
    several rows (tasks, incidents, activations) break the tie by id: with these, in the order
    the rows were made, the same on every database, instead of at random."""
    with _sortable_lock:
        now = time.time_ns() // 1_000_000
        last, counter = _sortable_last
        if now > last:
            counter = 0
        else:
            now, counter = last, counter + 1
            if counter > 0xFFF:
                now, counter = last + 1, 0
        _sortable_last[:] = [now, counter]
    tail = int.from_bytes(os.urandom(8)) & ((1 << 62) - 1)
    value = (now << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | tail
    return str(uuid.UUID(int=value))


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
