"""What a tick's page of firings costs the database, and that its bulk writes are exact.

On PostgreSQL a page's rows are built by the deciding thread and sent as the runs' insert plus
one combined statement (docs/schedules.md, "How a tick writes"), so the number of statements
does not grow with the page: a change that adds a statement per firing fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, func, select

from app.context import ticker_database
from app.db import ScheduleHistoryEvent, ScheduleOccurrence
from app.db.bulk import combine


@contextmanager
def recorded(engine: Any) -> Iterator[list[str]]:
    seen: list[str] = []

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", on_statement)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)


def _tick_writes(h: Any, count: int, hour: str) -> tuple[list[dict[str, Any]], list[str]]:
    with recorded(ticker_database(h.app).engine) as seen:
        rows = h.tick(hour)
    assert sum(row["outcome"] == "triggered" for row in rows) == count
    writes = [s for s in seen if s.split()[0] in {"INSERT", "UPDATE", "DELETE", "WITH"}]
    return rows, writes


def test_a_page_of_firings_costs_the_same_statements_whatever_its_size(h, backend):
    h.workflow()
    for index in range(3):
        h.create(f"few{index}", "0 13 * * *")
    for index in range(40):
        h.create(f"many{index}", "0 14 * * *")
    _rows, few = _tick_writes(h, 3, "2026-01-05T13:00:00Z")
    rows, many = _tick_writes(h, 40, "2026-01-05T14:00:00Z")
    assert len(many) == len(few), (few, many)
    if backend == "postgres":
        # The runs, then their events, the ledger, the audit and the schedules' new state in
        # one statement, the run counts, the ticker's beat.
        assert len(many) <= 4, many
        assert sum(s.startswith('INSERT INTO "runs"') for s in many) == 1
    # Everything each firing writes is there, exactly once.
    for row in rows:
        events = [e.event_type for e in h.run_events(row["run_id"])]
        assert events == ["ScheduleTriggered", "run_started"], row
    with h.db.session() as session:
        ledger = session.scalar(
            select(func.count())
            .select_from(ScheduleOccurrence)
            .where(ScheduleOccurrence.kind == "started")
        )
        audit = session.scalar(
            select(func.count())
            .select_from(ScheduleHistoryEvent)
            .where(ScheduleHistoryEvent.event_type == "ScheduleTriggered")
        )
    assert ledger == audit == 43
    for index in range(40):
        read = h.read(f"many{index}")
        assert read["fires_count"] == 1 and read["next_fire_at"] == "2026-01-06T14:00:00Z"
        assert read["latest_run_id"] == next(
            row["run_id"] for row in rows if row["schedule_id"] == f"many{index}"
        )


def test_combined_statements_keep_their_parameters_apart():
    sql, params = combine(
        [
            ("INSERT INTO a (x) SELECT %(c0)s FROM t(%(rows)s)", {"c0": 1, "rows": "[1]"}),
            ("UPDATE b SET y = %(c0)s", {"c0": 2}),
        ]
    )
    assert sql == (
        "WITH s0 AS (INSERT INTO a (x) SELECT %(s0_c0)s FROM t(%(s0_rows)s)) "
        "UPDATE b SET y = %(s1_c0)s"
    )
    assert params == {"s0_c0": 1, "s0_rows": "[1]", "s1_c0": 2}
    assert combine([("UPDATE b SET y = %(c0)s", {"c0": 2})]) == (
        "UPDATE b SET y = %(c0)s",
        {"c0": 2},
    )
