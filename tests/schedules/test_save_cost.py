"""What one schedule save costs the database: statements, transactions, commits.

Upper bounds that the save path reached (docs/benchmarks.md), so a change that adds a round
trip to every save fails here, on both databases, instead of only in a benchmark.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from app.context import database


@contextmanager
def recorded(app: Any) -> Iterator[dict[str, list[str]]]:
    """The statements (and commits) the app's engine runs inside the block."""
    seen: dict[str, list[str]] = {"statements": [], "commits": []}
    engine = database(app).engine

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen["statements"].append(" ".join(statement.split())[:120])

    def on_commit(_conn: Any) -> None:
        seen["commits"].append("COMMIT")

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", on_commit)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "commit", on_commit)


def _writes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.split()[0] in {"INSERT", "UPDATE", "DELETE", "WITH"}]


def _body(schedule_id: str, cron: str = "*/5 * * * *", **fields: Any) -> dict[str, Any]:
    return {"id": schedule_id, "cron": cron, "workflow": "invoice-sync", "input": {}} | fields


def test_a_new_schedule_is_one_write_transaction_of_a_few_statements(h, backend):
    h.workflow()
    # The token's first use is recorded (once a minute at most); measure a later request.
    h.save(_body("warm-up"), expect=201)
    with recorded(h.app) as seen:
        saved = h.save(_body("s"), expect=201)
    statements = seen["statements"]
    assert saved["revision"] == 1 and saved["principal"] == "olga"
    assert saved["running_run_ids"] == [] and saved["next_fire_at"] == "2026-01-05T12:05:00Z"
    if backend == "postgres":
        # Caller (token, user, namespace, role, row-security scope and clock in one
        # statement), the manual clock of the tests, the target, the schedule, then its
        # revision and event together; one transaction, one commit, no savepoint.
        assert len(statements) <= 5, statements
        assert len(seen["commits"]) == 1
    else:
        # Reads in a deferred transaction; the write lock only for the three inserts.
        assert len(statements) <= 8, statements
        assert [s for s in statements if s.startswith("BEGIN IMMEDIATE")] == ["BEGIN IMMEDIATE"]
        assert len(seen["commits"]) == 2
    assert not [s for s in statements if "SAVEPOINT" in s]
    # Inserts only: the next occurrence is known before the schedule is written.
    assert all(s.startswith(("INSERT", "WITH")) for s in _writes(statements)), statements
    assert h.event_types("s") == ["ScheduleCreated"]
    assert h.history("s")[0]["payload"]["next_fire_at"] == saved["next_fire_at"]


def test_a_replacement_stays_one_transaction(h, backend):
    h.workflow()
    h.save(_body("s"), expect=201)
    with recorded(h.app) as seen:
        replaced = h.save(_body("s", "*/10 * * * *"), 1, expect=200)
    assert replaced["revision"] == 2
    # The row lock, the target, the update, the revision and event (one statement on
    # PostgreSQL), the schedule's running runs for the answer.
    if backend == "postgres":
        assert len(seen["commits"]) == 1
        assert len(seen["statements"]) <= 7, seen["statements"]
    else:
        assert len(seen["statements"]) <= 10, seen["statements"]
    assert h.event_types("s") == ["ScheduleCreated", "ScheduleUpdated"]


def test_a_refused_save_writes_nothing_and_an_existing_id_still_answers_409(h):
    h.workflow()
    h.save(_body("s"), expect=201)
    before = h.counts()
    with recorded(h.app) as seen:
        invalid = h.save(_body("new", input=3), expect=422)
        taken = h.save(_body("s", input=3), expect=409)
    assert invalid["error"]["code"] == "INPUT_SCHEMA"
    assert taken["error"]["code"] == "SCHEDULE_REVISION"
    assert taken["error"]["details"]["current_revision"] == 1
    assert not _writes(seen["statements"])
    assert h.counts() == before
