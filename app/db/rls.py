"""Row-level security: which namespaces a transaction may touch (docs/postgres.md).

On PostgreSQL every namespace-scoped table has a forced policy that compares its namespace with
the transaction-local setting `almanac.namespaces` (an integer array). A session carries a
`Scope`; at the start of each of its transactions one statement sets that setting with
`set_config(..., true)` (the same as `SET LOCAL`), so it ends with the transaction and a pooled
connection never carries it over. A transaction whose session has no scope sets nothing (no
statement at all: an unset setting already means no namespace) and sees no business row. A
scope bound during a transaction is set then, by one statement (`bind`), or by a query the caller
runs anyway (`user_scope_columns` and `adopt`: an API request's authentication). SQLite has no
row security: scopes are ignored there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, event, literal_column, text
from sqlalchemy.orm import Session, sessionmaker

SETTING = "almanac.namespaces"
# 'on' lets a transaction touch every namespace, even one created after it began.
ALL_SETTING = "almanac.all_namespaces"
_INFO_KEY = "almanac.scope"
_BEGAN_KEY = "almanac.began"

# Tables with a namespace column, and children that reach one through their parent's key.
# (The policies of children use their parent's, so they follow it.)
NAMESPACE_TABLES = (
    "workflows",
    "activations",
    "runs",
    "tasks",
    "schedules",
    "run_incidents",
    "run_rollup",
)
CHILD_TABLES = {
    "workflow_versions": ("workflow_id", "workflows"),
    "run_history_events": ("run_pk", "runs"),
    "deadlines": ("run_pk", "runs"),
    "signals": ("run_pk", "runs"),
    "run_branches": ("run_pk", "runs"),
    "schedule_revisions": ("schedule_pk", "schedules"),
    "schedule_occurrences": ("schedule_pk", "schedules"),
    "schedule_history_events": ("schedule_pk", "schedules"),
}
# Shared by every namespace: accounts, the catalog of namespaces, process state.
GLOBAL_TABLES = (
    "namespaces",
    "users",
    "memberships",
    "api_tokens",
    "clock_state",
    "ticker_beats",
    "scheduler_cursors",
    "console_sessions",
    "login_failures",
)


@dataclass(frozen=True)
class Scope:
    """Whose namespaces a session's transactions may touch.

    `ids`: exactly these. `user_id`: the namespaces where that user holds a role (every one
    for a superuser), resolved by the database at each transaction's start so a grant or
    revoke takes effect at once. `everything`: every namespace (workers and trusted tools).
    """

    ids: tuple[int, ...] = ()
    user_id: int | None = None
    everything: bool = False
    # Other transaction-local settings set in the same statement (the ticker's timeouts).
    limits: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, ids: Iterable[int]) -> Scope:
        return cls(ids=tuple(sorted(set(ids))))

    @classmethod
    def user(cls, user_id: int) -> Scope:
        return cls(user_id=user_id)

    @classmethod
    def all(cls) -> Scope:
        return cls(everything=True)

    def limited(self, **settings: str) -> Scope:
        """This scope plus transaction-local settings, e.g. `statement_timeout="4s"`."""
        return replace(self, limits=tuple(sorted(settings.items())))

    @property
    def empty(self) -> bool:
        return not (self.ids or self.user_id is not None or self.everything or self.limits)


NOTHING = Scope()

_ACTIVE_USER = "FROM users u WHERE u.id = :user_id AND u.disabled_at IS NULL"
_USER_IDS = (
    "(SELECT array_agg(m.namespace_id) FROM memberships m "
    f"WHERE m.user_id = :user_id AND EXISTS (SELECT 1 {_ACTIVE_USER}))"
)
_USER_ALL = f"(SELECT CASE WHEN u.is_superuser THEN 'on' END {_ACTIVE_USER})"


# How long a request acting as a user (the API, the console) waits for a lock before it answers
# 503 BACKEND_BUSY, which clients retry: without it, a request behind a lock held for minutes
# outlived the client's 30 s timeout ("no answer, it may have been done") and the change landed
# after the client had given up. Set with the user's scope, in the same statement.
REQUEST_LOCK_TIMEOUT = "10s"
_REQUEST_LIMIT = f"set_config('lock_timeout', '{REQUEST_LOCK_TIMEOUT}', true)"


def _statement(scope: Scope) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {}
    if scope.user_id is not None:
        ids, every = _USER_IDS, _USER_ALL
        params["user_id"] = scope.user_id
    else:
        ids, every = ":ids", ("'on'" if scope.everything else "'off'")
        params["ids"] = "{" + ",".join(str(int(i)) for i in scope.ids) + "}"
    calls = [
        f"set_config('{SETTING}', coalesce(CAST({ids} AS text), ''), true)",
        f"set_config('{ALL_SETTING}', coalesce({every}, 'off'), true)",
    ]
    if scope.user_id is not None:
        calls.append(_REQUEST_LIMIT)
    for index, (name, setting) in enumerate(scope.limits):
        calls.append(f"set_config(:name_{index}, :value_{index}, true)")
        params |= {f"name_{index}": name, f"value_{index}": setting}
    # The same round trip reads the database's clock (app.db.clock uses it as "now").
    return "SELECT clock_timestamp(), " + ", ".join(calls), params


def apply(connection: Connection, scope: Scope) -> datetime | None:
    """Set `scope` (one statement) for the connection's current transaction; PostgreSQL only.
    Returns the database's clock at that moment."""
    if connection.dialect.name != "postgresql":
        return None
    sql, params = _statement(scope)
    began: datetime = connection.execute(text(sql), params).scalar_one()
    return began


def user_scope_columns(user_id: str, is_superuser: str) -> list[ColumnElement[Any]]:
    """`Scope.user` as columns of a query that reads the user anyway (PostgreSQL): the clock,
    then the two settings, for the user whose id and superuser flag are the SQL expressions
    `user_id` and `is_superuser`. Record the result with `adopt`."""
    ids = f"(SELECT array_agg(m.namespace_id) FROM memberships m WHERE m.user_id = {user_id})"
    every = f"CASE WHEN {is_superuser} THEN 'on' ELSE 'off' END"
    return [
        literal_column("clock_timestamp()"),
        literal_column(f"set_config('{SETTING}', coalesce(CAST({ids} AS text), ''), true)"),
        literal_column(f"set_config('{ALL_SETTING}', {every}, true)"),
        literal_column(_REQUEST_LIMIT),
    ]


def adopt(session: Session, scope: Scope, stamp: datetime | None) -> None:
    """Give `session` `scope` from now on, when a statement of its current transaction has
    already set it (`user_scope_columns`) and read the clock (`stamp`)."""
    session.info[_INFO_KEY] = scope
    if stamp is not None:
        session.info[_BEGAN_KEY] = (session.get_transaction(), stamp)


def began_at(session: Session) -> datetime | None:
    """The database's clock when the session's current transaction began (PostgreSQL), so
    reading "now" costs no round trip of its own; None where there is no such reading."""
    if session.get_bind().dialect.name != "postgresql":
        return None
    session.connection()  # begins the transaction if needed, and `_on_begin` reads the clock
    stamp = session.info.get(_BEGAN_KEY)
    if stamp is None or stamp[0] is not session.get_transaction():
        return None
    return stamp[1]  # type: ignore[no-any-return]


def scope_of(session: Session) -> Scope:
    return session.info.get(_INFO_KEY, NOTHING)  # type: ignore[no-any-return]


def bind(session: Session, scope: Scope) -> None:
    """Give `session` a scope from now on, including the transaction already open, if any."""
    session.info[_INFO_KEY] = scope
    if session.in_transaction() and session.get_bind().dialect.name == "postgresql":
        stamp = apply(session.connection(), scope)
        transaction = session.get_transaction()
        began = session.info.get(_BEGAN_KEY)
        if stamp is not None and (began is None or began[0] is not transaction or began[1] is None):
            # The transaction began unscoped and read no clock: this is its first reading.
            session.info[_BEGAN_KEY] = (transaction, stamp)


def install(factory: sessionmaker[Session]) -> None:
    """Make every session of `factory` set its scope when a transaction begins."""

    @event.listens_for(factory, "after_begin")
    def _on_begin(session: Session, transaction: Any, connection: Connection) -> None:
        # A savepoint shares its transaction's settings.
        if transaction.nested:
            return
        scope = scope_of(session)
        # Unscoped: nothing to set, and the clock is read only if someone asks (`began_at`).
        stamp = None if scope.empty else apply(connection, scope)
        session.info[_BEGAN_KEY] = (transaction, stamp)
