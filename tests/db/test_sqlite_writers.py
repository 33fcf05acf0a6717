"""SQLite writers of one process queue for the write lock, and always leave the queue."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from app.context import database
from app.db.session import begin_write

sqlite_only = pytest.mark.parametrize("backend", ["sqlite"])


def _count(session) -> int:
    return int(session.scalar(text("SELECT count(*) FROM namespaces")))


def _add(session, name: str) -> None:
    session.execute(
        text("INSERT INTO namespaces (name, created_at) VALUES (:n, '2026-01-05 12:00:00')"),
        {"n": name},
    )


@sqlite_only
def test_a_second_writer_waits_for_the_first_and_then_sees_its_row(app):
    db = database(app)
    waiting, done = threading.Event(), threading.Event()
    seen: list[int] = []

    def second() -> None:
        with db.session() as session:
            waiting.set()
            begin_write(session)
            seen.append(_count(session))
            _add(session, "second")
            session.commit()
        done.set()

    with db.session() as first:
        begin_write(first)
        _add(first, "first")
        thread = threading.Thread(target=second)
        thread.start()
        assert waiting.wait(10)
        # It cannot get the write lock while this transaction holds it.
        assert not done.wait(0.2)
        first.commit()
    thread.join(10)
    assert done.is_set() and seen == [1]
    with db.session() as session:
        assert _count(session) == 2


@sqlite_only
@pytest.mark.parametrize("ending", ["rollback", "close", "error"])
def test_a_writer_that_gives_up_leaves_the_queue(app, ending):
    db = database(app)
    session = db.sessions()
    begin_write(session)
    _add(session, "abandoned")
    if ending == "rollback":
        session.rollback()
        session.close()
    elif ending == "close":
        session.close()
    else:
        with pytest.raises(RuntimeError), db.session() as failing:
            session.close()
            begin_write(failing)
            raise RuntimeError("the request failed mid-write")
    # The next writer (same thread) gets the lock at once instead of waiting 30 s.
    finished = threading.Event()

    def write() -> None:
        with db.session() as again:
            begin_write(again)
            _add(again, "next")
            again.commit()
        finished.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert finished.wait(5)
    with db.session() as check:
        names = set(check.scalars(text("SELECT name FROM namespaces")))
    assert names == {"next"}


@sqlite_only
def test_a_thread_holding_the_lock_is_refused_a_second_writer_at_once(app):
    """A second write session of the same thread would wait 30 s for itself: it is a bug, and
    says so at once."""
    db = database(app)
    with db.session() as first:
        begin_write(first)
        with db.session() as second, pytest.raises(RuntimeError, match="already holds"):
            begin_write(second)
        _add(first, "first")
        first.commit()
    with db.session() as session:
        assert _count(session) == 1
