"""Server-side console sessions: what a browser's cookie refers to, and how it ends.

The cookie carries a random token; the row (keyed by its sha256) decides whether it still signs
anyone in. Logout, a password change, disabling the user and `users revoke-sessions` end rows at
once, so a cookie copied before any of them is refused afterwards.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db import ConsoleSession, User
from app.db.session import begin_write

ABSOLUTE_LIFETIME = timedelta(hours=8)
IDLE_TIMEOUT = timedelta(hours=1)
# `last_seen_at` is written at most this often, so page loads stay reads.
SEEN_RESOLUTION = timedelta(minutes=1)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start(session: Session, now: datetime, user: User) -> str:
    """Open a new session for `user`; returns the token for the cookie (never stored)."""
    token = secrets.token_urlsafe(32)
    session.add(
        ConsoleSession(
            token_sha256=_digest(token),
            user_id=user.id,
            created_at=now,
            last_seen_at=now,
            expires_at=now + ABSOLUTE_LIFETIME,
        )
    )
    session.flush()
    return token


def resolve(session: Session, now: datetime, token: str) -> User | None:
    """The active user behind `token`, or None when it is unknown, ended, expired or idle."""
    row = session.scalar(
        select(ConsoleSession).where(ConsoleSession.token_sha256 == _digest(token))
    )
    if row is None or row.revoked_at is not None or now >= row.expires_at:
        return None
    if now - row.last_seen_at >= IDLE_TIMEOUT:
        return None
    user = session.get(User, row.user_id)
    if user is None or user.disabled_at is not None:
        return None
    if now - row.last_seen_at >= SEEN_RESOLUTION:
        begin_write(session)
        session.execute(
            update(ConsoleSession).where(ConsoleSession.id == row.id).values(last_seen_at=now)
        )
        session.commit()
    return user


def end(session: Session, now: datetime, token: str) -> None:
    """End one session (logout); the caller commits."""
    session.execute(
        update(ConsoleSession)
        .where(ConsoleSession.token_sha256 == _digest(token), ConsoleSession.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def end_all(session: Session, now: datetime, user: User) -> int:
    """End every open session of `user`; returns how many. The caller commits."""
    result = session.execute(
        update(ConsoleSession)
        .where(ConsoleSession.user_id == user.id, ConsoleSession.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
