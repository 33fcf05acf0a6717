"""Users, passwords, API tokens, memberships and namespaces (docs/foundation.md, docs/api.md)."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Select, bindparam, delete, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from app.auth import sessions as console_sessions
from app.auth.errors import AlreadyExists, NamespaceNotFound, TokenNotFound, UserNotFound
from app.auth.grants import ROLE_GRANTS
from app.db import ApiToken, Membership, Namespace, User, rls
from app.db.base import upsert_insert
from app.db.session import begin_write
from app.errors import ValidationFailed

TOKEN_USE_RESOLUTION = timedelta(minutes=1)
# Stored in a 32-bit column.
MAX_ACTIVE_RUNS_LIMIT = 2**31 - 1
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Compared against when the user does not exist, so failures take the same time either way.
_DUMMY_HASH = generate_password_hash("not-a-real-password")


def _check_name(value: str, field: str) -> str:
    if not NAME_RE.fullmatch(value):
        msg = "must be 1-64 characters of letters, digits, '.', '_' or '-', starting alphanumeric"
        raise ValidationFailed([{"loc": [field], "msg": msg}])
    return value


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- namespaces -------------------------------------------------------------------------------


# Built once: building a statement costs more than running it.
_NAMESPACE_BY_NAME = select(Namespace).where(Namespace.name == bindparam("name"))


def get_namespace(session: Session, name: str) -> Namespace:
    namespace = session.scalar(_NAMESPACE_BY_NAME, {"name": name})
    if namespace is None:
        raise NamespaceNotFound(name)
    return namespace


def create_namespace(
    session: Session, now: datetime, name: str, max_active_runs: int | None = None
) -> Namespace:
    """Create a namespace; the caller commits."""
    _check_name(name, "name")
    _check_max_active_runs(max_active_runs)
    values = {"name": name, "max_active_runs": max_active_runs, "created_at": now}
    return _insert_unless_taken(session, Namespace, values, "name", "namespace")


Named = TypeVar("Named", Namespace, User)


def _insert_unless_taken(
    session: Session, model: type[Named], values: dict[str, Any], key: str, kind: str
) -> Named:
    """Insert a row unless its `key` is taken, in one statement: a create of the same name by
    another transaction at once is waited for and then found taken (AlreadyExists: a 409, or
    the command's one line, not a unique violation escaping as a 500 or a traceback)."""
    insert = upsert_insert(session.get_bind().dialect.name)
    created = session.scalar(
        insert(model)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[key])
        .returning(model.id)
    )
    if created is None:
        raise AlreadyExists(kind, values[key])
    row = session.get(model, created)
    assert row is not None
    return row


def _check_max_active_runs(max_active_runs: int | None) -> None:
    if max_active_runs is not None and not 1 <= max_active_runs <= MAX_ACTIVE_RUNS_LIMIT:
        msg = f"must be from 1 to {MAX_ACTIVE_RUNS_LIMIT}"
        raise ValidationFailed([{"loc": ["max_active_runs"], "msg": msg}])


def set_max_active_runs(
    session: Session, name: str, max_active_runs: int | None
) -> tuple[int | None, int | None]:
    """Set (None: clear) the namespace's `max_active_runs`; the limit before and after. The
    caller commits; the next tick and the next run start read the new limit."""
    _check_max_active_runs(max_active_runs)
    namespace = get_namespace(session, name)
    # Read again under a row lock: a change of the same namespace at once is waited for, and
    # the limit reported as "before" is the one this change replaces (on SQLite the write lock
    # the account commands take first already orders them).
    before = session.scalar(
        select(Namespace.max_active_runs).where(Namespace.id == namespace.id).with_for_update()
    )
    namespace.max_active_runs = max_active_runs
    session.flush()
    return before, max_active_runs


def visible_namespaces(
    session: Session, user: User, *, after: str | None = None, limit: int | None = None
) -> list[Namespace]:
    """The namespaces `user` may switch to, by name: all of them for a superuser, else its
    memberships; with `after` and `limit`, a page of them."""
    query = select(Namespace).order_by(Namespace.name)
    if not user.is_superuser:
        query = query.join(Membership).where(Membership.user_id == user.id)
    if after is not None:
        query = query.where(Namespace.name > after)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def role_in(session: Session, user: User, namespace: Namespace) -> str | None:
    return session.scalar(
        select(Membership.role).where(
            Membership.user_id == user.id, Membership.namespace_id == namespace.id
        )
    )


# --- users ------------------------------------------------------------------------------------


def get_user(session: Session, username: str) -> User:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise UserNotFound(username)
    return user


def check_new_account(username: str, password: str) -> None:
    """The rules a new user's name and password must meet (no database needed)."""
    _check_name(username, "username")
    if len(password) < 8:
        raise ValidationFailed([{"loc": ["password"], "msg": "must be at least 8 characters"}])


def create_user(
    session: Session, now: datetime, username: str, password: str, *, superuser: bool = False
) -> User:
    check_new_account(username, password)
    values = {
        "username": username,
        "password_hash": generate_password_hash(password),
        "is_superuser": superuser,
        "created_at": now,
    }
    return _insert_unless_taken(session, User, values, "username", "user")


def disable_user(session: Session, now: datetime, username: str) -> tuple[User, datetime | None]:
    """Disable `username` and end its console sessions at once; the user and when it had been
    disabled already (None: it was active). The caller commits."""
    user = get_user(session, username)
    was_disabled_at = user.disabled_at
    if was_disabled_at is None:
        user.disabled_at = now
    console_sessions.end_all(session, now, user)
    return user, was_disabled_at


def enable_user(session: Session, username: str) -> tuple[User, datetime | None]:
    """Undo `disable_user`: the user and when it had been disabled (None: it was not, and
    nothing changes). The caller commits.

    Its unrevoked API tokens work again; a schedule the tick blocked meanwhile
    (`principal_unauthorized`) stays blocked until it is saved again; the console sessions that
    disabling ended stay ended (the user signs in again)."""
    user = get_user(session, username)
    was_disabled_at = user.disabled_at
    if was_disabled_at is not None:
        user.disabled_at = None
    return user, was_disabled_at


def set_password(session: Session, now: datetime, username: str, password: str) -> User:
    """Change `username`'s password and end every console session it has; the caller commits."""
    if len(password) < 8:
        raise ValidationFailed([{"loc": ["password"], "msg": "must be at least 8 characters"}])
    user = get_user(session, username)
    user.password_hash = generate_password_hash(password)
    console_sessions.end_all(session, now, user)
    return user


def revoke_sessions(session: Session, now: datetime, username: str) -> int:
    """End every console session of `username`; returns how many were open."""
    return console_sessions.end_all(session, now, get_user(session, username))


def grant_role(session: Session, username: str, namespace_name: str, role: str) -> str | None:
    """Give `username` exactly `role` in the namespace, replacing any earlier role; returns the
    role it had there before (None: none). The caller commits.

    One insert-or-update statement: a grant of the same membership by another transaction at
    once is waited for and then overwritten, never a unique violation."""
    if role not in ROLE_GRANTS:
        msg = f"must be one of {', '.join(ROLE_GRANTS)}"
        raise ValidationFailed([{"loc": ["role"], "msg": msg}])
    user = get_user(session, username)
    namespace = get_namespace(session, namespace_name)
    key = {"user_id": user.id, "namespace_id": namespace.id}
    before = session.scalar(
        select(Membership.role).where(
            Membership.user_id == user.id, Membership.namespace_id == namespace.id
        )
    )
    insert = upsert_insert(session.get_bind().dialect.name)
    session.execute(
        insert(Membership)
        .values(**key, role=role)
        .on_conflict_do_update(index_elements=list(key), set_={"role": role})
    )
    return before


def revoke_role(session: Session, username: str, namespace_name: str) -> tuple[User, str | None]:
    """Remove `username`'s membership in the namespace; the user and the role it had, or None
    if it had none (then nothing changes). The caller commits. (A superuser keeps reaching
    every namespace, membership or not.)

    API tokens and console sessions read memberships at each request (and, on PostgreSQL,
    row security at each transaction's start), so the next request no longer reaches it."""
    user = get_user(session, username)
    namespace = get_namespace(session, namespace_name)
    # One statement: a revoke of the same membership at once is waited for and then finds
    # nothing to remove, so exactly one of them reports the role.
    return user, session.scalar(
        delete(Membership)
        .where(Membership.user_id == user.id, Membership.namespace_id == namespace.id)
        .returning(Membership.role)
    )


def authenticate_password(session: Session, username: str, password: str) -> User | None:
    """The active user with these credentials, or None, without revealing which part failed."""
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        check_password_hash(_DUMMY_HASH, password)
        return None
    if not check_password_hash(user.password_hash, password) or user.disabled_at is not None:
        return None
    return user


# --- tokens -----------------------------------------------------------------------------------


def create_token(
    session: Session, now: datetime, username: str, name: str, token: str | None = None
) -> tuple[ApiToken, str]:
    """Register a token for `username`; return the row and the token, which is never stored."""
    _check_name(name, "name")
    user = get_user(session, username)
    exists = select(ApiToken.id).where(ApiToken.user_id == user.id, ApiToken.name == name)
    if session.scalar(exists) is not None:
        raise AlreadyExists("token", name)
    token = token or "alm_" + secrets.token_urlsafe(32)
    row = ApiToken(user_id=user.id, name=name, token_sha256=hash_token(token), created_at=now)
    session.add(row)
    session.flush()
    return row, token


def revoke_token(
    session: Session, now: datetime, username: str, name: str
) -> tuple[ApiToken, bool]:
    """Revoke `username`'s token `name`; the row, and whether it was revoked already (then it
    keeps the instant it was revoked at)."""
    user = get_user(session, username)
    row = session.scalar(select(ApiToken).where(ApiToken.user_id == user.id, ApiToken.name == name))
    if row is None:
        raise TokenNotFound(username, name)
    already = row.revoked_at is not None
    if not already:
        row.revoked_at = now
    return row, already


@dataclass(frozen=True)
class TokenUse:
    """A valid token's user, and when the token was last recorded as used."""

    user: User
    token_id: int
    last_used_at: datetime | None


@dataclass(frozen=True)
class Caller(TokenUse):
    """An API request's caller, and what the same statement read for the request.

    `namespace` and `role`: the namespace the request names (None if there is none of that
    name) and the caller's role there. `bound_at`: on PostgreSQL the statement also bound the
    caller's row-security scope and read the database's clock, at this instant.
    """

    namespace: Namespace | None = None
    role: str | None = None
    bound_at: datetime | None = None


def _caller_query(bind_scope: bool, with_namespace: bool) -> Select[Any]:
    """Token, user, [namespace and role,] [scope and clock]: one statement per API request."""
    query = (
        select(User, ApiToken.id, ApiToken.last_used_at)
        .join(ApiToken, ApiToken.user_id == User.id)
        .where(
            ApiToken.token_sha256 == bindparam("sha256"),
            ApiToken.revoked_at.is_(None),
            User.disabled_at.is_(None),
        )
    )
    if with_namespace:
        role = (
            select(Membership.role)
            .where(Membership.user_id == User.id, Membership.namespace_id == Namespace.id)
            .scalar_subquery()
        )
        query = query.add_columns(Namespace, role).outerjoin(
            Namespace, Namespace.name == bindparam("namespace")
        )
    if bind_scope:
        query = query.add_columns(*rls.user_scope_columns("users.id", "users.is_superuser"))
    return query


# Built once per shape: building a statement costs more than running it.
_CALLER_QUERIES = {
    (bind_scope, with_namespace): _caller_query(bind_scope, with_namespace)
    for bind_scope in (False, True)
    for with_namespace in (False, True)
}


def find_caller(session: Session, token: str, namespace: str | None = None) -> Caller | None:
    """The active user owning this unrevoked token (None if there is none) and, in the same
    statement, the namespace named `namespace` with the user's role there. On PostgreSQL the
    statement also binds the user's scope (`rls.user_scope_columns`): see `Caller.bound_at`."""
    # Row security (and the database's clock) is PostgreSQL's.
    bind_scope = session.get_bind().dialect.name == "postgresql"
    query = _CALLER_QUERIES[(bind_scope, namespace is not None)]
    params = {"sha256": hash_token(token)}
    if namespace is not None:
        params["namespace"] = namespace
    row = session.execute(query, params).first()
    if row is None:
        return None
    found = Caller(row[0], row[1], row[2])
    rest = list(row[3:])
    if namespace is not None:
        found = replace(found, namespace=rest[0], role=rest[1])
        rest = rest[2:]
    if rest:
        found = replace(found, bound_at=rest[0])
    return found


def record_token_use(session: Session, now: datetime, use: TokenUse) -> None:
    """Write `last_used_at` at most once a minute (so reads stay reads), committing it."""
    if use.last_used_at is not None and now - use.last_used_at < TOKEN_USE_RESOLUTION:
        return
    begin_write(session)
    session.execute(update(ApiToken).where(ApiToken.id == use.token_id).values(last_used_at=now))
    session.commit()


# --- first start ------------------------------------------------------------------------------


def bootstrap_admin(
    session: Session, now: datetime, username: str, password: str, token: str | None
) -> User | None:
    """Create the first superuser and `default` namespace if no user exists (docs/api.md)."""
    if session.scalar(select(User.id).limit(1)) is not None:
        return None
    user = create_user(session, now, username, password, superuser=True)
    if session.scalar(select(Namespace.id).where(Namespace.name == "default")) is None:
        create_namespace(session, now, "default")
    grant_role(session, username, "default", "admin")
    if token:
        create_token(session, now, username, "bootstrap", token=token)
    return user
