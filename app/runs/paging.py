"""Keyset pages: the rows after a cursor position, in a stable order, one extra to see if more."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, and_, or_

R = TypeVar("R")


def after_key(
    columns: Sequence[Any], values: Sequence[Any], *, descending: bool
) -> ColumnElement[bool]:
    """`(columns) > (values)` (or `<` when descending), spelled out so each side keeps its type."""
    clauses = []
    for index, column in enumerate(columns):
        equal = [columns[i] == values[i] for i in range(index)]
        beyond = column < values[index] if descending else column > values[index]
        clauses.append(and_(*equal, beyond))
    return or_(*clauses)


def split_page(
    rows: list[R], limit: int, key: Callable[[R], list[Any]]
) -> tuple[list[R], list[Any] | None]:
    """The first `limit` rows and the key of the last one when more follow."""
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, key(rows[-1])
