"""A failed background turn (a tick, a worker's step) is one line when the database is
unavailable, which repeats every turn of an outage, and a traceback for anything else."""

from __future__ import annotations

import logging

from sqlalchemy.exc import OperationalError

from app.db.session import log_failure

log = logging.getLogger("tests.log_failure")


def test_an_unavailable_database_is_one_line_and_a_bug_keeps_its_traceback(caplog):
    caplog.set_level(logging.INFO, logger="tests.log_failure")
    refused = OperationalError(
        "SELECT 1", {}, Exception("the database is not accepting connections\nDETAIL: x")
    )
    log_failure(log, "worker step failed", refused)
    log_failure(log, "tick failed", ValueError("a bug"))
    outage, bug = caplog.records
    assert outage.levelno == logging.WARNING and outage.exc_info is None
    assert outage.getMessage() == (
        "worker step failed: database unavailable: the database is not accepting connections"
    )
    assert bug.levelno == logging.ERROR and bug.exc_info[1].args == ("a bug",)
    assert bug.getMessage() == "tick failed"


class Deadlock(Exception):
    sqlstate = "40P01"


def test_a_deadlock_is_a_lock_conflict_not_an_outage(caplog):
    caplog.set_level(logging.INFO, logger="tests.log_failure")
    cause = Deadlock("deadlock detected\nDETAIL: Process 1 waits for ShareLock")
    log_failure(log, "worker step failed", OperationalError("SELECT", {}, cause))
    (line,) = caplog.records
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert line.getMessage() == "worker step failed: lock conflict: deadlock detected"


def test_a_refused_statement_is_one_error_line_naming_what_to_check(caplog):
    # A login without its grants logged a 30-line traceback every second.
    from sqlalchemy.exc import ProgrammingError

    caplog.set_level(logging.INFO, logger="tests.log_failure")
    cause = Exception("permission denied for table ticker_beats\nDETAIL: x")
    log_failure(log, "tick failed", ProgrammingError("UPDATE ticker_beats", {}, cause))
    (line,) = caplog.records
    assert line.levelno == logging.ERROR and line.exc_info is None
    message = line.getMessage()
    assert message.startswith(
        "tick failed: the database refused it: permission denied for table ticker_beats"
    )
    assert "grants" in message and "migrated" in message
