"""One line, not a traceback, when a one-shot command's database is away or refuses it.

A command run by hand or by a script against a database it cannot reach (a closed port, a login
that does not exist) or that refuses the statement (a login without the grants) prints the
driver's first line and the setting that names the login, then exits 1. Any other statement the
database refuses is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import click
from flask import Flask, current_app
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, ProgrammingError

from app.db import schema_check
from app.db.session import LOCK_CONFLICTS

# What the database raises when it is away, refused the login or refused a statement.
DATABASE_FAILURES = (OperationalError, InterfaceError, ProgrammingError)
INSUFFICIENT_PRIVILEGE = "42501"
# The setting the app's own login comes from (account commands, `secrets rotate`).
APP_VARIABLE = "ALMANAC_DATABASE_URL"


def first_line(exc: DBAPIError) -> str:
    """The driver's own first line (never the statement or its parameters)."""
    lines = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def cause(exc: DBAPIError) -> str:
    """As a tick's `failures` name a cause: the driver's exception type and its first line."""
    orig = exc.orig if exc.orig is not None else exc
    return f"{type(orig).__name__}: {first_line(exc)}"


# Said by every command that reads or writes Almanac's tables, run before `db upgrade` (or
# before the `db upgrade` of this version, on a database migrated only partly).
UNMIGRATED = (
    "the database is not migrated for this version (it has no table {table}): run "
    "`flask --app wsgi db upgrade` first"
)
UNDEFINED_TABLE = "42P01"
_MISSING_TABLE = re.compile(r'no such table: ([\w.]+)|relation "([^"]+)" does not exist')


def missing_table(exc: DBAPIError) -> str:
    """The table the statement found missing, as the database named it ("?" if it did not)."""
    found = _MISSING_TABLE.search(str(exc.orig))
    return next((name for name in found.groups() if name), "?") if found else "?"


def unmigrated(exc: DBAPIError) -> bool:
    """Whether the statement failed because a table does not exist (SQLite, PostgreSQL)."""
    if getattr(exc.orig, "sqlstate", None) == UNDEFINED_TABLE:
        return True
    text = str(exc.orig)
    return "no such table" in text or ("relation" in text and "does not exist" in text)


def refused_privilege(exc: DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE


def describe(exc: DBAPIError, variable: str, refused_hint: str | None = None) -> str:
    """One line naming the cause and the setting whose login met it (its name, not its value:
    the URL may hold a password)."""
    text = first_line(exc)
    if isinstance(exc, ProgrammingError):
        return f"the database refused it: {text} ({refused_hint or f'check {variable}'})"
    if getattr(exc.orig, "sqlstate", None) in LOCK_CONFLICTS:
        return (
            f"lock conflict, nothing was changed: {text} (another transaction held the rows; "
            "try again)"
        )
    return f"cannot use the database ({variable}): {text}"


def clean_error(
    exc: BaseException,
    variable: str,
    refused_hint: str | None = None,
    *,
    refusals: bool = True,
    tables: bool = False,
) -> click.ClickException | None:
    """The one-line error for `exc` when the database is away or refused this login a
    privilege, or (for a command that uses Almanac's `tables`) was never migrated; None for
    anything else (a statement this code got wrong is a bug: its traceback stays), and for any
    refusal with `refusals=False` (the caller words its own)."""
    if tables and isinstance(exc, DBAPIError) and unmigrated(exc):
        return click.ClickException(UNMIGRATED.format(table=missing_table(exc)))
    if isinstance(exc, OperationalError | InterfaceError):
        return click.ClickException(describe(exc, variable))
    if isinstance(exc, ProgrammingError) and refusals and refused_privilege(exc):
        return click.ClickException(describe(exc, variable, refused_hint))
    return None


def migration_variable(app: Flask | None = None) -> str:
    """The setting `db upgrade`, `db downgrade` and `db create-roles` log in with."""
    config = (app or current_app).config
    if config.get("MIGRATION_DATABASE_URL"):
        return "ALMANAC_MIGRATION_DATABASE_URL"
    return "ALMANAC_DATABASE_URL (ALMANAC_MIGRATION_DATABASE_URL is unset)"


def ticker_variable(app: Flask | None = None, *, work: bool = False) -> str:
    """The setting(s) a tick logs in with: the scheduler's login when set (and the app's for
    `--work`, whose steps run as the app)."""
    config = (app or current_app).config
    if not config.get("SCHEDULER_DATABASE_URL"):
        return "ALMANAC_DATABASE_URL"
    if work:
        return "ALMANAC_SCHEDULER_DATABASE_URL or ALMANAC_DATABASE_URL"
    return "ALMANAC_SCHEDULER_DATABASE_URL"


@contextmanager
def database_errors(
    variable: str, refused_hint: str | None = None, *, refusals: bool = True, tables: bool = False
) -> Iterator[None]:
    """Exit 1 with one clean line when the database is away or refused, or with `tables` was
    never migrated (see `clean_error`)."""
    try:
        yield
    except DATABASE_FAILURES as exc:
        error = clean_error(exc, variable, refused_hint, refusals=refusals, tables=tables)
        if error is None:
            raise
        raise error from None


def refuse_unmigrated(engine: Engine, variable: str) -> None:
    """One line, exit 1, before a command writes to a database not migrated for this version
    (tables or columns missing, or an earlier revision): what a serving process refuses at
    start, a one-shot command refuses too, whatever tables it happens to touch."""
    with database_errors(variable):
        reason = schema_check.unmigrated(engine)
    if reason:
        raise click.ClickException(reason)
