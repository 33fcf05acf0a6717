"""Bulk inserts and updates for the tick's hot path: one statement per table and page.

PostgreSQL receives what differs between the rows as one JSON document expanded server-side by
`json_to_recordset`, and what every row shares once, as typed parameters (one round trip).
SQLite, in-process, gets the driver's executemany with the columns' own bind processors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, Table, text
from sqlalchemy.engine import Dialect

Row = dict[str, Any]
# A PostgreSQL statement built ahead of time: its SQL and parameters (`execute` sends it).
Statement = tuple[str, dict[str, Any]]


def _names(table: Table, rows: Sequence[Row]) -> tuple[str, ...]:
    key = (table, tuple(rows[0]))
    names = _NAMES.get(key)
    if names is None:
        names = _NAMES[key] = tuple(_names_of(table, rows[0]))
    return names


# (table, the rows' keys) -> the columns an insert writes: those keys and the defaulted ones.
_NAMES: dict[tuple[Table, tuple[str, ...]], tuple[str, ...]] = {}


def _names_of(table: Table, row: Row) -> list[str]:
    names = list(row)
    # Python-side column defaults (scalars, or callables like generated ids) left out.
    for column in table.columns:
        default = column.default
        if (
            column.name not in names
            and default is not None
            and (default.is_scalar or default.is_callable)
        ):
            names.append(column.name)
    return names


def _with_defaults(table: Table, names: Sequence[str], rows: Sequence[Row]) -> Sequence[Row]:
    missing = [name for name in names if name not in rows[0]]
    if not missing:
        return rows
    defaults = {name: table.c[name].default for name in missing}
    return [
        row
        | {
            name: default.arg(None) if default.is_callable else default.arg  # type: ignore[union-attr]
            for name, default in defaults.items()
        }
        for row in rows
    ]


def _document(columns: dict[str, list[Any]]) -> str:
    """The rows' `columns` as one JSON array of objects; instants as ISO text, each distinct
    one formatted once."""
    instants: dict[datetime, str] = {}

    def text(value: Any) -> Any:
        if not isinstance(value, datetime):
            return value
        found = instants.get(value)
        if found is None:
            found = instants[value] = value.isoformat()
        return found

    names = list(columns)
    values = [
        list(map(text, column)) if datetime in set(map(type, column)) else column
        for column in columns.values()
    ]
    rows = [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]
    return json.dumps(rows, separators=(",", ":"))


def _rows_document(names: Sequence[str], rows: Sequence[Row]) -> str:
    """`rows` (their `names` columns) as `_document` writes them."""
    return _document({name: [row[name] for row in rows] for name in names})


def _same(values: list[Any]) -> bool:
    """Whether every value is the same (and of the same type: True is not 1)."""
    return values.count(values[0]) == len(values) and len(set(map(type, values))) == 1


def _constant_text(value: Any) -> str | None:
    """A constant's text for `CAST(... AS type)`: the column type's own input syntax."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


_SQL_TYPES: dict[tuple[str, str], str] = {}


def _sql_type(dialect: Dialect, table: Table, name: str) -> str:
    key = (table.name, name)
    if key not in _SQL_TYPES:
        _SQL_TYPES[key] = str(table.c[name].type.compile(dialect=dialect))
    return _SQL_TYPES[key]


def _postgres_source(
    dialect: Dialect, table: Table, names: Sequence[str], rows: Sequence[Row], keep: Sequence[str]
) -> tuple[dict[str, str], str, dict[str, Any]]:
    """How a statement reads `rows` on PostgreSQL: an SQL expression per column, the FROM
    clause and the parameters.

    A value every row shares (a page's `now`, namespace, activation, empty objects) is sent once
    as a typed parameter; the columns that differ (and `keep`) travel as one JSON document
    expanded server-side by `json_to_recordset` with just those columns: one round trip, and no
    per-row work for what does not change.
    """
    params: dict[str, Any] = {}
    exprs: dict[str, str] = {}
    varying: dict[str, list[Any]] = {}
    for index, name in enumerate(names):
        values = [row[name] for row in rows]
        if name in keep or not _same(values):
            varying[name] = values
            exprs[name] = f"x.{name}"
        else:
            params[f"c{index}"] = _constant_text(values[0])
            exprs[name] = f"CAST(%(c{index})s AS {_sql_type(dialect, table, name)})"
    if varying:
        params["rows"] = _document(varying)
        types = {name: _sql_type(dialect, table, name) for name in varying}
        columns = ", ".join(f"{name} {kind}" for name, kind in types.items())
        # A document with JSON columns is parsed once as jsonb (cheaper than per value).
        kind = "jsonb" if "JSONB" in types.values() else "json"
        source = f"{kind}_to_recordset(CAST(%(rows)s AS {kind})) AS x({columns})"
    else:
        params["count"] = len(rows)
        source = "generate_series(1, %(count)s) AS x"
    return exprs, source, params


def _sqlite_params(
    conn: Connection, table: Table, names: Sequence[str], rows: Sequence[Row]
) -> list[tuple[Any, ...]]:
    """Driver parameters, column by column; a page repeats the same instants and JSON values
    (its `now`, empty objects, one schedule's labels), so each distinct one is converted once."""
    columns = []
    for name in names:
        process = table.c[name].type._cached_bind_processor(conn.dialect)
        values = [row[name] for row in rows]
        if process is not None:
            values = list(map(_memoized(process), values))
        columns.append(values)
    return list(zip(*columns, strict=True))


def _memoized(process: Callable[[Any], Any]) -> Callable[[Any], Any]:
    by_value: dict[Any, Any] = {}
    by_identity: dict[int, Any] = {}

    def convert(value: Any) -> Any:
        if isinstance(value, dict | list):
            # Unhashable: the same object (e.g. one schedule's labels) is converted once,
            # and so is every empty object.
            key = id(value) if value else -len(type(value).__name__)
            if key not in by_identity:
                by_identity[key] = process(value)
            return by_identity[key]
        # (type, value): True and 1 are equal keys but different JSON.
        typed = (type(value), value)
        if typed not in by_value:
            by_value[typed] = process(value)
        return by_value[typed]

    return convert


def insert_rows(
    conn: Connection, table: Table, rows: Sequence[Row], returning: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """Insert `rows` (the same keys in each); return the `returning` columns of every row.

    On SQLite `returning` must start with a unique column present in the rows (its key).
    """
    if not rows:
        return []
    if conn.dialect.name == "postgresql":
        sql, params = insert_statement(conn.dialect, table, rows, returning)
        result = conn.exec_driver_sql(sql, params)
        return [tuple(row) for row in result] if returning else []
    names = _names(table, rows)
    rows = _with_defaults(table, names, rows)
    columns = ", ".join(names)
    marks = ", ".join("?" for _ in names)
    conn.exec_driver_sql(
        f'INSERT INTO "{table.name}" ({columns}) VALUES ({marks})',
        _sqlite_params(conn, table, names, rows),
    )  # type: ignore[arg-type]
    if not returning:
        return []
    # sqlite3's executemany returns no rows: read them back by a unique key of the batch.
    key = returning[1] if returning[0] == "id" else returning[0]
    found: list[tuple[Any, ...]] = []
    keys = [row[key] for row in rows]
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        found.extend(
            tuple(row)
            for row in conn.exec_driver_sql(
                f'SELECT {", ".join(returning)} FROM "{table.name}" WHERE {key} IN ({marks})',
                tuple(chunk),
            )
        )
    return found


def update_rows(conn: Connection, table: Table, rows: Sequence[Row]) -> None:
    """Update rows by `id`; every row carries the same keys (`id` plus the changed columns)."""
    if not rows:
        return
    names = [name for name in rows[0] if name != "id"]
    if conn.dialect.name == "postgresql":
        execute(conn, [update_statement(conn.dialect, table, rows)])
        return
    assignments = ", ".join(f"{name} = ?" for name in names)
    conn.exec_driver_sql(
        f'UPDATE "{table.name}" SET {assignments} WHERE id = ?',
        _sqlite_params(conn, table, [*names, "id"], rows),
    )  # type: ignore[arg-type]


def insert_new(conn: Connection, table: Table, row: Row, unique: Sequence[str]) -> int | None:
    """Insert `row` unless a row with the same `unique` key exists; its new `id`, or None.

    One statement, and no error to recover from (so no savepoint): two concurrent inserts of
    one key leave exactly one row, the loser waiting for the winner's transaction to end.
    """
    names = _names(table, [row])
    rows = _with_defaults(table, names, [row])
    columns, key = ", ".join(names), ", ".join(unique)
    if conn.dialect.name == "postgresql":
        sql = (
            f'INSERT INTO "{table.name}" ({columns}) SELECT {columns} FROM '
            f'json_populate_recordset(NULL::"{table.name}", CAST(%(rows)s AS json)) '
            f"ON CONFLICT ({key}) DO NOTHING RETURNING id"
        )
        found = conn.exec_driver_sql(sql, {"rows": _rows_document(names, rows)}).scalar()
    else:
        marks = ", ".join("?" for _ in names)
        sql = (
            f'INSERT INTO "{table.name}" ({columns}) VALUES ({marks}) '
            f"ON CONFLICT ({key}) DO NOTHING RETURNING id"
        )
        found = conn.exec_driver_sql(sql, _sqlite_row(conn, table, names, rows[0])).scalar()
    return None if found is None else int(found)


def _sqlite_row(conn: Connection, table: Table, names: Sequence[str], row: Row) -> tuple[Any, ...]:
    """Driver parameters of one row (no memoizing: each value is converted once anyway)."""
    key = (table.name, tuple(names))
    processors = _ROW_PROCESSORS.get(key)
    if processors is None:
        processors = [table.c[name].type._cached_bind_processor(conn.dialect) for name in names]
        _ROW_PROCESSORS[key] = processors
    return tuple(
        row[name] if process is None else process(row[name])
        for name, process in zip(names, processors, strict=True)
    )


# (table, columns) -> each column's bind processor on SQLite (the only dialect that uses them).
_ROW_PROCESSORS: dict[tuple[str, tuple[str, ...]], list[Callable[[Any], Any] | None]] = {}


def insert_each(conn: Connection, batches: Sequence[tuple[Table, Sequence[Row]]]) -> None:
    """Insert rows into several tables: one statement on PostgreSQL (each table's insert in
    its own common table expression), one per table on SQLite."""
    if conn.dialect.name == "postgresql":
        statements = insert_each_statements(conn.dialect, batches)
        execute(conn, [combine(statements)] if statements else [])
        return
    for table, rows in batches:
        if len(rows) > 1:
            insert_rows(conn, table, rows)
        elif rows:
            names = _names(table, rows)
            row = _with_defaults(table, names, rows)[0]
            marks = ", ".join("?" for _ in names)
            conn.exec_driver_sql(
                f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({marks})',
                _sqlite_row(conn, table, names, row),
            )


def insert_each_statements(
    dialect: Dialect, batches: Sequence[tuple[Table, Sequence[Row]]]
) -> list[Statement]:
    """PostgreSQL: a statement per non-empty batch, for `combine` to send as one."""
    return [insert_statement(dialect, table, rows) for table, rows in batches if rows]


def insert_statement(
    dialect: Dialect, table: Table, rows: Sequence[Row], returning: Sequence[str] = ()
) -> Statement:
    """PostgreSQL: the statement inserting `rows` (the same keys in each, at least one)."""
    names = _names(table, rows)
    rows = _with_defaults(table, names, rows)
    if len(rows) == 1:
        # One row (a save's revision and event): its values as typed parameters of a VALUES
        # list, the statement built once per shape.
        sql = _one_row_sql(dialect, table, names)
        params = {f"c{index}": _constant_text(rows[0][name]) for index, name in enumerate(names)}
    else:
        exprs, source, params = _postgres_source(dialect, table, names, rows, ())
        sql = (
            f'INSERT INTO "{table.name}" ({", ".join(names)}) '
            f"SELECT {', '.join(exprs[name] for name in names)} FROM {source}"
        )
    if returning:
        sql += f" RETURNING {', '.join(returning)}"
    return sql, params


def _one_row_sql(dialect: Dialect, table: Table, names: tuple[str, ...]) -> str:
    key = (table.name, names)
    sql = _ONE_ROW.get(key)
    if sql is None:
        values = ", ".join(
            f"CAST(%(c{index})s AS {_sql_type(dialect, table, name)})"
            for index, name in enumerate(names)
        )
        sql = _ONE_ROW[key] = f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({values})'
    return sql


# (table, columns) -> the PostgreSQL statement inserting one row of them.
_ONE_ROW: dict[tuple[str, tuple[str, ...]], str] = {}


def update_statement(dialect: Dialect, table: Table, rows: Sequence[Row]) -> Statement:
    """PostgreSQL: the statement updating rows by `id` (the same keys in each, at least one)."""
    names = [name for name in rows[0] if name != "id"]
    exprs, source, params = _postgres_source(dialect, table, ["id", *names], rows, ("id",))
    assignments = ", ".join(f"{name} = {exprs[name]}" for name in names)
    return f'UPDATE "{table.name}" AS t SET {assignments} FROM {source} WHERE t.id = x.id', params


def allocate_ids(conn: Connection, table: Table, count: int) -> list[int]:
    """PostgreSQL: `count` new ids from the table's own sequence, ascending, so rows can
    be built (and refer to each other) before they are inserted."""
    sequences = _SEQUENCES.setdefault(conn.engine, {})
    if table.name not in sequences:
        found = conn.execute(
            text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table.name}
        )
        sequences[table.name] = found.scalar_one()
    # The sequence as a constant: named by an expression, it is looked up again for every id
    # (500 ids took 4.3 ms instead of 0.7).
    sql = "SELECT nextval(CAST(:sequence AS regclass)) FROM generate_series(1, :count)"
    ids = conn.execute(text(sql), {"sequence": sequences[table.name], "count": count}).scalars()
    return sorted(ids)


# Each engine's sequence behind a table's `id` (`pg_get_serial_sequence`, asked once).
_SEQUENCES: WeakKeyDictionary[Engine, dict[str, str]] = WeakKeyDictionary()


def combine(statements: Sequence[Statement]) -> Statement:
    """PostgreSQL: several statements built here as one (each in a common table expression,
    its parameters renamed apart), so they cost one round trip. They all see the snapshot
    taken before any of them: none may rely on rows another one writes (a child's
    row-security check would not see a parent inserted beside it)."""
    if len(statements) == 1:
        return statements[0]
    parts, params = [], {}
    for index, (sql, own) in enumerate(statements):
        parts.append(_PARAMETER.sub(rf"%(s{index}_\1)s", sql))
        params.update({f"s{index}_{name}": value for name, value in own.items()})
    heads = ", ".join(f"s{index} AS ({sql})" for index, sql in enumerate(parts[:-1]))
    return f"WITH {heads} {parts[-1]}", params


# A named parameter in the SQL this module builds (JSON and values travel as parameters).
_PARAMETER = re.compile(r"%\((\w+)\)s")


def execute(conn: Connection, statements: Sequence[Statement]) -> None:
    """Send statements built ahead of time, in order."""
    for sql, params in statements:
        conn.exec_driver_sql(sql, params)
