"""Users, tokens, namespaces and the first-start admin."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from app import context
from app.auth import service
from app.cli.failures import APP_VARIABLE, DATABASE_FAILURES, clean_error, refuse_unmigrated
from app.db.roles import APP_ROLE
from app.db.session import begin_write
from app.errors import AlmanacError


@contextmanager
def _transaction() -> Iterator[tuple[Session, Any]]:
    """A committed write session and the clock's now; domain errors become a clean CLI error.

    Every account command writes, so the write lock is taken before the first read: on SQLite a
    read that later upgrades to a write fails at once if the ticker committed in between.
    """
    refuse_unmigrated(context.database().engine, APP_VARIABLE)
    with context.database().session() as session:
        try:
            begin_write(session)
            yield session, context.clock().now(session)
            session.commit()
        except AlmanacError as exc:
            raise click.ClickException(exc.message) from exc
        except DATABASE_FAILURES as exc:
            # Away, refused (the scheduler's login may not write accounts), or not migrated yet:
            # one line.
            error = clean_error(exc, APP_VARIABLE, REFUSED_HINT, tables=True)
            if error is None:
                raise
            raise error from None


# Said when the login lacks a grant an account command needs (the scheduler's login, say).
REFUSED_HINT = f"account commands need the app login {APP_ROLE} or the owner; check {APP_VARIABLE}"


def _read_password(password: str | None, from_stdin: bool) -> str:
    if from_stdin and password is not None:
        # Standard input won in silence: the password typed on the command line was not set.
        raise click.UsageError("give the password with --password or --password-stdin, not both")
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    if password is None:
        return click.prompt("Password", hide_input=True, confirmation_prompt=True)  # type: ignore[no-any-return]
    return password


users = AppGroup("users", help="Console and API accounts.")


@users.command("create")
@click.argument("name")
@click.option("--password", default=None, help="The password (prefer --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--superuser", is_flag=True, help="Every grant in every namespace.")
def create_user(name: str, password: str | None, password_stdin: bool, superuser: bool) -> None:
    """Create user NAME."""
    secret = _read_password(password, password_stdin)
    with _transaction() as (session, now):
        service.create_user(session, now, name, secret, superuser=superuser)
    click.echo(f"created user {name}{' (superuser)' if superuser else ''}")


@users.command("disable")
@click.argument("name")
def disable_user(name: str) -> None:
    """Disable user NAME: no sign-in, no tokens, and its schedules block (`users enable`
    undoes it)."""
    with _transaction() as (session, now):
        _user, was_disabled_at = service.disable_user(session, now, name)
    if was_disabled_at is not None:
        since = was_disabled_at.isoformat()
        click.echo(f"user {name} was already disabled (since {since}); nothing changed")
        return
    click.echo(f"disabled user {name}")


@users.command("enable")
@click.argument("name")
def enable_user(name: str) -> None:
    """Enable user NAME again after `users disable`: its unrevoked tokens work again; the
    console sessions disabling ended stay ended (NAME signs in again)."""
    with _transaction() as (session, _now):
        _user, was_disabled_at = service.enable_user(session, name)
    if was_disabled_at is None:
        click.echo(f"user {name} is not disabled; nothing changed")
        return
    click.echo(f"enabled user {name} (disabled since {was_disabled_at.isoformat()})")


@users.command("set-password")
@click.argument("name")
@click.option("--password", default=None, help="The new password (prefer --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def set_password(name: str, password: str | None, password_stdin: bool) -> None:
    """Change user NAME's password; every console session of NAME ends."""
    secret = _read_password(password, password_stdin)
    with _transaction() as (session, now):
        service.set_password(session, now, name, secret)
    click.echo(f"changed the password of {name}; its console sessions ended")


@users.command("revoke-sessions")
@click.argument("name")
def revoke_sessions(name: str) -> None:
    """End every console session of user NAME at once (API tokens are not affected)."""
    with _transaction() as (session, now):
        count = service.revoke_sessions(session, now, name)
    click.echo(f"ended {count} console session(s) of {name}")


@users.command("grant")
@click.argument("name")
@click.argument("namespace")
@click.argument("role", type=click.Choice(["viewer", "operator", "deployer", "admin"]))
def grant(name: str, namespace: str, role: str) -> None:
    """Give user NAME the ROLE in NAMESPACE."""
    with _transaction() as (session, _now):
        before = service.grant_role(session, name, namespace, role)
    if before == role:
        click.echo(f"{name} is already {role} in {namespace}; nothing changed")
        return
    click.echo(f"{name} is {role} in {namespace}" + (f" (was {before})" if before else ""))


@users.command("revoke")
@click.argument("name")
@click.argument("namespace")
def revoke(name: str, namespace: str) -> None:
    """Take away user NAME's role in NAMESPACE, at once for its tokens and console sessions."""
    with _transaction() as (session, _now):
        user, role = service.revoke_role(session, name, namespace)
    # A superuser reaches every namespace without a membership: saying only "no longer" would
    # read as if it were cut off.
    still = f" ({name} is a superuser: it still reaches {namespace})" if user.is_superuser else ""
    if role is None:
        click.echo(f"{name} has no role in {namespace}; nothing changed{still}")
        return
    click.echo(f"{name} is no longer {role} in {namespace}{still}")


tokens = AppGroup("tokens", help="API bearer tokens (stored hashed, shown once).")


@tokens.command("create")
@click.argument("name")
@click.option("--name", "label", required=True, help="A label to revoke it by later.")
def create_token(name: str, label: str) -> None:
    """Create an API token for user NAME; the token is printed alone on the last line."""
    with _transaction() as (session, now):
        _row, token = service.create_token(session, now, name, label)
    click.echo(f"token {label!r} for {name} (shown once, store it now):")
    click.echo(token)


@tokens.command("revoke")
@click.argument("name")
@click.argument("label")
def revoke_token(name: str, label: str) -> None:
    """Revoke user NAME's token LABEL (revoking it again changes nothing and says so)."""
    with _transaction() as (session, now):
        row, already = service.revoke_token(session, now, name, label)
    if already:
        assert row.revoked_at is not None
        click.echo(
            f"token {label!r} of {name} was already revoked (at {row.revoked_at.isoformat()}); "
            "nothing changed"
        )
        return
    click.echo(f"revoked token {label!r} of {name}")


namespaces = AppGroup("namespaces", help="Namespaces.")


@namespaces.command("create")
@click.argument("name")
@click.option("--max-active-runs", type=click.IntRange(min=1), default=None)
def create_namespace(name: str, max_active_runs: int | None) -> None:
    """Create namespace NAME."""
    with _transaction() as (session, now):
        service.create_namespace(session, now, name, max_active_runs)
    click.echo(f"created namespace {name}")


class _LimitOrNone(click.ParamType):
    """A `max_active_runs`: an integer of at least 1, as `namespaces create` reads it, or
    `none` for no limit."""

    name = "INTEGER|none"
    _number = click.IntRange(min=1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            return None
        return self._number.convert(value, param, ctx)


@namespaces.command("set")
@click.argument("name")
@click.option(
    "--max-active-runs",
    type=_LimitOrNone(),
    metavar="N|none",
    required=True,
    help="At most this many active runs (at least 1), or `none` for no limit.",
)
def set_namespace(name: str, max_active_runs: int | None) -> None:
    """Change namespace NAME's limit; the next tick and run start apply it."""
    with _transaction() as (session, _now):
        before, after = service.set_max_active_runs(session, name, max_active_runs)

    def shown(limit: int | None) -> str:
        return "none" if limit is None else str(limit)

    if before == after:
        click.echo(f"max_active_runs of {name} is {shown(after)} already; nothing changed")
        return
    click.echo(f"max_active_runs of {name}: {shown(before)} -> {shown(after)}")


admin = AppGroup("admin", help="First-start bootstrap.")


@admin.command("bootstrap")
def bootstrap() -> None:
    """Create the first superuser if no user exists, generating a password if unset."""
    config = current_app.config
    password = config["ADMIN_PASSWORD"] or secrets.token_urlsafe(12)
    username = config["ADMIN_USER"]
    with _transaction() as (session, now):
        user = service.bootstrap_admin(session, now, username, password, config["ADMIN_TOKEN"])
    if user is None:
        ignored = " (ALMANAC_ADMIN_TOKEN applies on a first start only; use `tokens create`)"
        click.echo(
            "users exist already; nothing to bootstrap" + (ignored if config["ADMIN_TOKEN"] else "")
        )
        return
    shown = password if not config["ADMIN_PASSWORD"] else "(from ALMANAC_ADMIN_PASSWORD)"
    click.echo(f"created superuser {username!r}, admin of namespace 'default'; password: {shown}")


GROUPS: tuple[AppGroup, ...] = (users, tokens, namespaces, admin)
