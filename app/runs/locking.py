"""Write transactions that serialize correctly on both backends.

SQLite serializes writers, but a deferred transaction that reads and then writes can fail when
another writer got there first; `BEGIN IMMEDIATE` takes the write lock up front instead. On
PostgreSQL, rows are locked with `SELECT ... FOR UPDATE` (`SKIP LOCKED` where work is shared).
Lock order everywhere: run rows (ascending id when several), then their deadlines, signals, tasks.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from app.db.session import begin_write

__all__ = ["begin_write", "for_update"]

T = TypeVar("T", bound=tuple[Any, ...])


def for_update(
    session: Session, query: Select[T], *, skip_locked: bool = False, share: bool = False
) -> Select[T]:
    """Add FOR UPDATE (optionally SKIP LOCKED; FOR SHARE with `share`, for a reader that must
    see the rows unchanged until it ends) on PostgreSQL; SQLite holds the write lock, and its
    read transaction is one snapshot."""
    if session.get_bind().dialect.name == "sqlite":
        return query
    return query.with_for_update(skip_locked=skip_locked, read=share)
