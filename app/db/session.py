"""Engines and sessions: SQLite in WAL mode by default, PostgreSQL through psycopg 3.

SQLite serializes writers. Threads of one process that want the write lock queue on a Python
lock first (`WriterQueue`): SQLite's own busy handler sleeps (1, 2, 5 ... ms) and retries, so
eight threads contending for the lock spent most of their time asleep while the lock was free.
The busy timeout still covers writers in other processes.
"""

from __future__ import annotations

import copy
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from app.db import rls
from app.db.files import prepare_sqlite_file
from app.db.rls import Scope

# Below the clients' 30 s timeout: a writer kept waiting this long answers 503 BACKEND_BUSY
# (retried), never "no answer" for a change that then lands after the client gave up.
SQLITE_BUSY_TIMEOUT_MS = 10_000
# A PostgreSQL connection unused for this long is pinged before its next use.
PING_AFTER_IDLE_SECONDS = 1.0
_WRITE_KEY = "almanac.write_transaction"
_RETURNED_KEY = "almanac.returned_at"


def normalize_url(url: str) -> str:
    """Route plain `postgresql://` URLs to psycopg 3, the driver we pin."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class WriterQueue:
    """The in-process queue for one SQLite file's write lock, released after COMMIT/ROLLBACK."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def acquire(self) -> None:
        if self._owner == threading.get_ident():
            # A second connection of the thread that holds the lock would wait for itself.
            raise RuntimeError("this thread already holds the SQLite write lock on another session")
        if not self._lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            # As SQLAlchemy wraps the driver's own "database is locked", so every face answers
            # it alike (503 BACKEND_BUSY): raised from a BEGIN hook, it is not wrapped for us.
            locked = sqlite3.OperationalError("database is locked")
            raise OperationalError("BEGIN IMMEDIATE", None, locked)
        self._owner = threading.get_ident()

    def release(self) -> None:
        self._owner = None
        self._lock.release()


_QUEUES: dict[str, WriterQueue] = {}
_QUEUES_LOCK = threading.Lock()


def _writer_queue(url: str) -> WriterQueue:
    """One queue per database file, shared by every engine of this process on that file."""
    database = make_url(url).database or ""
    key = os.path.realpath(database) if database and database != ":memory:" else url
    with _QUEUES_LOCK:
        return _QUEUES.setdefault(key, WriterQueue())


class _SQLiteConnection(sqlite3.Connection):
    """A connection that leaves the writer queue once its write transaction has ended."""

    queue: WriterQueue | None = None

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.leave_queue()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.leave_queue()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.leave_queue()

    def leave_queue(self) -> None:
        queue, self.queue = self.queue, None
        if queue is not None:
            queue.release()


def _lower(value: Any) -> Any:
    # PostgreSQL lowers a dotted capital I to a plain i; Python to i and a combining dot.
    return value.replace("İ", "i").lower() if isinstance(value, str) else value


def _translate(value: Any, source: Any, target: Any) -> Any:
    """PostgreSQL's translate(): each character of `source` in `value` becomes the one at the
    same place in `target`, or is dropped when `target` is shorter."""
    if not isinstance(value, str) or not isinstance(source, str) or not isinstance(target, str):
        return None if value is None else value
    table = {ord(c): (target[i] if i < len(target) else None) for i, c in enumerate(source)}
    return value.translate(table)


def _configure_sqlite(engine: Engine, queue: WriterQueue) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy (not pysqlite) decide when transactions begin, so BEGIN IMMEDIATE works.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()
        # SQLite's lower() folds ASCII only, so a case-insensitive search (`q`) missed `ÉPÉE`
        # for `épée`; PostgreSQL folds every letter. No index is built on lower().
        dbapi_conn.create_function("lower", 1, _lower, deterministic=True)
        dbapi_conn.create_function("translate", 3, _translate, deterministic=True)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Writers are serialized by SQLite anyway; IMMEDIATE takes the lock up front
        # instead of failing on upgrade from a read lock (docs/schedules.md).
        if not conn.get_execution_options().get("sqlite_immediate"):
            conn.exec_driver_sql("BEGIN DEFERRED")
            return
        dbapi_conn = conn.connection.dbapi_connection
        queue.acquire()
        dbapi_conn.queue = queue
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            dbapi_conn.leave_queue()
            raise


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine for `url` with the settings each backend needs."""
    url = normalize_url(url)
    # A failed statement's message never carries its parameters into a log (a token's hash,
    # a secret's ciphertext, a user's input).
    kwargs.setdefault("hide_parameters", True)
    if url.startswith("sqlite"):
        prepare_sqlite_file(url)
        connect_args = {"check_same_thread": False, "factory": _SQLiteConnection}
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine, _writer_queue(url))
        return engine
    if "poolclass" not in kwargs:
        kwargs |= {"pool_size": 10, "max_overflow": 20}
    engine = create_engine(url, **kwargs)
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection before use when it sat unused for a while (`pool_pre_ping`,
    but not on every checkout: the ping was one round trip of every transaction).

    A database restart outlasts the idle time, so connections kept through it are pinged and
    replaced; and any disconnect met in use invalidates the whole pool, so the next checkouts
    open fresh connections either way.
    """

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _fresh(_dbapi_conn: Any, record: Any) -> None:
        record.info[_RETURNED_KEY] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get(_RETURNED_KEY)
        if returned is not None and time.monotonic() - returned < PING_AFTER_IDLE_SECONDS:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as exc:
            if not engine.dialect.is_disconnect(exc, dbapi_conn, None):
                raise
            alive = False
        if not alive:
            # The pool discards this connection and checks out (or opens) another.
            raise DisconnectionError("the pooled connection is gone")


class Database:
    """An engine and its session factory, owned by one app (or one CLI process).

    Sessions carry a row-security scope (`app.db.rls`): `scope` is the one `session()` gives
    them unless told otherwise; `bound(scope)` is a view of the same engine with another.
    """

    def __init__(self, url: str, *, scope: Scope = rls.NOTHING) -> None:
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.scope = scope
        rls.install(self.sessions)

    def bound(self, scope: Scope) -> Database:
        """This database (same engine and pool) whose sessions get `scope`."""
        view = copy.copy(self)
        view.scope = scope
        return view

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def session(self, scope: Scope | None = None) -> Iterator[Session]:
        """Yield a session (with `scope`, else this database's) rolled back on error, closed."""
        session = self.sessions()
        rls.bind(session, self.scope if scope is None else scope)
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def dispose(self) -> None:
        self.engine.dispose()


def begin_write(session: Session, *, keep_reads: bool = False) -> None:
    """Start a write transaction now: `BEGIN IMMEDIATE` on SQLite, so a writer that read first
    queues on the lock instead of failing to upgrade a stale read (PostgreSQL locks rows).

    A transaction with only reads so far (authentication, lookups) is committed first; one
    that `begin_write` began already is kept (nested service calls need no second commit).
    With `keep_reads`, PostgreSQL goes on in the open transaction instead (its reads lock
    nothing, and a new transaction would bind its row-security scope again); SQLite must
    still start afresh.
    """
    current = session.get_transaction()
    if current is not None and session.info.get(_WRITE_KEY) is current:
        return
    if keep_reads and current is not None and session.get_bind().dialect.name != "sqlite":
        session.info[_WRITE_KEY] = current
        return
    if session.in_transaction():
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("begin_write with unflushed changes pending")
        session.commit()
    session.connection(execution_options={"sqlite_immediate": True})
    session.info[_WRITE_KEY] = session.get_transaction()


# Deadlock detected, lock not available (lock_timeout), serialization failure.
LOCK_CONFLICTS = frozenset({"40P01", "55P03", "40001"})


def is_outage(exc: BaseException) -> bool:
    """The database was away, or a lock was held past its timeout: the turn is retried, and a
    warning line says so (a refusal or a bug is an error)."""
    return isinstance(exc, OperationalError | InterfaceError)


# Insufficient privilege, undefined table, undefined column: the login lacks its grants or the
# schema is not migrated. Only an operator can fix these; any other refused statement is a bug.
REFUSAL_STATES = frozenset({"42501", "42P01", "42703"})
# SQLite says the same of a file that was never migrated (it has no grants).
_SQLITE_REFUSALS = ("no such table:", "no such column:")
REFUSED_HINT = (
    "check this login's grants: db upgrade as the owner grants them; and that the database is "
    "migrated"
)


def is_refusal(exc: BaseException) -> bool:
    """Whether the database refused the statement for what an operator must fix (a login
    without its grants, a schema not migrated), not for a statement this code got wrong."""
    orig = getattr(exc, "orig", None)
    if isinstance(exc, ProgrammingError):
        return getattr(orig, "sqlstate", None) in REFUSAL_STATES
    if isinstance(exc, OperationalError) and isinstance(orig, sqlite3.OperationalError):
        return str(orig).startswith(_SQLITE_REFUSALS)
    return False


def log_refused(log: logging.Logger, what: str, exc: BaseException) -> None:
    """One line for a request the database refused (`is_refusal`): the cause and what to check,
    no statement, no parameters, no traceback (it repeats every request until an operator
    acts)."""
    log.error("the database refused %s: %s (%s)", what, database_cause(exc), REFUSED_HINT)


def database_cause(exc: BaseException) -> str:
    """The first line of what the database (or else the exception) said: no statement, no
    parameters."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log a failed background turn (a tick, a worker's step): one line with the cause when the
    database is unreachable or refused (it repeats every turn of an outage: a traceback each
    time would bury everything else), the traceback for anything else (a bug)."""
    if is_outage(exc):
        # A deadlock or a lock wait past its timeout is the database answering: another
        # transaction held the rows, and the turn is tried again.
        state = getattr(getattr(exc, "orig", None), "sqlstate", None)
        kind = "lock conflict" if state in LOCK_CONFLICTS else "database unavailable"
        log.warning("%s: %s: %s", what, kind, database_cause(exc))
    elif isinstance(exc, ProgrammingError):
        # The database refused the statement (a login without its grants, a schema not
        # migrated): it repeats every turn until an operator acts; one line says what to fix.
        log.error("%s: the database refused it: %s (%s)", what, database_cause(exc), REFUSED_HINT)
        # A bug's statement is refused too: its traceback stays one log level away.
        log.debug(what, exc_info=exc)
    else:
        log.error(what, exc_info=exc)
