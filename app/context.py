"""The running app's database, clock and per-request session, shared by every delivery layer."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from flask import Flask, current_app, g
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

from app.db import Database, rls
from app.db.clock import ManualClock, SystemClock, clock_from
from app.settings import SettingError


def init_app(app: Flask) -> None:
    for name in ("DATABASE_URL", "MIGRATION_DATABASE_URL", "SCHEDULER_DATABASE_URL"):
        _check_url(name, app.config.get(name))
    # The owner's login is checked against a database someone named: alone (the first steps of
    # docs/postgres.md: `db create-roles`, `db upgrade`) it is the only database in play. The
    # ticker's always is: without ALMANAC_DATABASE_URL the app serves its own SQLite file.
    logins = ["SCHEDULER_DATABASE_URL"]
    if not app.config.get("DATABASE_URL_DEFAULTED"):
        logins.append("MIGRATION_DATABASE_URL")
    for name in logins:
        _check_same_database(name, app.config.get(name), app.config["DATABASE_URL"])
    db = Database(app.config["DATABASE_URL"])
    app.extensions["almanac.db"] = db
    # The ticker may log in as another role (the scheduler login, docs/postgres.md).
    ticker_url = app.config.get("SCHEDULER_DATABASE_URL")
    app.extensions["almanac.ticker_db"] = Database(ticker_url) if ticker_url else db
    app.extensions["almanac.clock"] = clock_from(app.config)
    app.teardown_appcontext(_close_session)


def _check_url(name: str, url: Any) -> None:
    """A database URL that does not parse stops the process, naming the setting (not the
    value: it may hold a password)."""
    if not url:
        return
    try:
        parsed = make_url(str(url))
        backend = parsed.get_backend_name()
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        backend = None
    else:
        if parsed.port is not None and not 1 <= parsed.port <= 65535:
            raise SettingError(f"ALMANAC_{name} names port {parsed.port}: a port is 1 to 65535")
    if backend not in ("sqlite", "postgresql", "postgres"):
        raise SettingError(
            f"ALMANAC_{name} is not a SQLite or PostgreSQL database URL (like "
            "sqlite:///path/almanac.db or postgresql://user@host/db)"
        )


def _check_same_database(name: str, url: Any, app_url: str) -> None:
    """The owner's and the ticker's logins reach the app's own database, or the process stops.

    Only the login may differ (a PostgreSQL host may too: a pooler for one, the server for the
    other). A web process on SQLite whose ticker logged in to a PostgreSQL database left over
    in the environment ticked that database, not the one it served.
    """
    if not url:
        return
    mine, theirs = make_url(str(app_url)), make_url(str(url))
    kinds = {_kind(mine), _kind(theirs)}
    if len(kinds) > 1:
        raise SettingError(
            f"ALMANAC_{name} is a {_kind(theirs)} database but ALMANAC_DATABASE_URL is "
            f"{_kind(mine)}: both must name the same database (only the login differs)"
        )
    if kinds == {"SQLite"}:
        same = _sqlite_file(mine) == _sqlite_file(theirs)
    else:
        same = (mine.database or "") == (theirs.database or "")
    if not same:
        raise SettingError(
            f"ALMANAC_{name} names another database than ALMANAC_DATABASE_URL: both must name "
            "the same database (only the login differs)"
        )


def _kind(url: URL) -> str:
    return "SQLite" if url.get_backend_name() == "sqlite" else "PostgreSQL"


def _sqlite_file(url: URL) -> str:
    database = url.database or ""
    return database if database in ("", ":memory:") else os.path.realpath(database)


def database(app: Flask | None = None) -> Database:
    return (app or current_app).extensions["almanac.db"]  # type: ignore[no-any-return]


def ticker_database(app: Flask | None = None) -> Database:
    """The database as the ticker reaches it: the scheduler login when one is configured."""
    return (app or current_app).extensions["almanac.ticker_db"]  # type: ignore[no-any-return]


def clock(app: Flask | None = None) -> SystemClock | ManualClock:
    return (app or current_app).extensions["almanac.clock"]  # type: ignore[no-any-return]


def session() -> Session:
    """This request's session, opened on first use and closed at teardown."""
    if "db_session" not in g:
        g.db_session = database().sessions()
    return g.db_session  # type: ignore[no-any-return]


def act_as(user_id: int, bound_at: datetime | None = None) -> None:
    """From now on this request's transactions may touch the namespaces of `user_id`.

    `bound_at`: the statement that found the user already bound them in the open transaction
    (`rls.user_scope_columns`) and read the database's clock then.
    """
    if bound_at is None:
        rls.bind(session(), rls.Scope.user(user_id))
    else:
        rls.adopt(session(), rls.Scope.user(user_id), bound_at)


def now() -> datetime:
    """The clock's "now", read once per request so every decision in it agrees."""
    if "now" not in g:
        g.now = clock().now(session())
    return g.now  # type: ignore[no-any-return]


def _close_session(_exc: Any) -> None:
    db_session = g.pop("db_session", None)
    if db_session is not None:
        db_session.close()
