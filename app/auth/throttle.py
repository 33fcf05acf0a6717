"""Login throttling, kept in the database so every process sees the same counts.

After 5 failures for one username within 15 minutes, or 30 from one client address, further
attempts are refused until the oldest counted failure leaves the window. An attempt takes its
place in both counts before the password hash is computed, in the same short transaction as the
check, so attempts sent at the same time cannot all pass a check that none has written to yet;
refused attempts cost almost nothing. A successful sign-in then clears the username's count.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.db import LoginFailure
from app.db.session import begin_write
from app.errors import AlmanacError

WINDOW = timedelta(minutes=15)
PER_USERNAME = 5
PER_ADDRESS = 30
# First keys of the PostgreSQL advisory locks that order attempts for one username and for one
# address (the second key is a hash of the name or address).
USERNAME_LOCK = 7310015
ADDRESS_LOCK = 7310016


class TooManyAttempts(AlmanacError):
    """Too many failed sign-ins; `retry_after` is whole seconds until one is allowed again."""

    code = "CAPACITY"

    def __init__(self, retry_after: int) -> None:
        super().__init__("too many failed sign-ins; try again later", retry_after=retry_after)
        self.retry_after = retry_after


def _wait(
    session: Session, now: datetime, column: InstrumentedAttribute[str], value: str, limit: int
) -> float:
    """Seconds until fewer than `limit` failures for `value` remain in the window (0 if now)."""
    times = list(
        session.scalars(
            select(LoginFailure.attempted_at)
            .where(column == value, LoginFailure.attempted_at > now - WINDOW)
            .order_by(LoginFailure.attempted_at.desc())
            .limit(limit)
        )
    )
    if len(times) < limit:
        return 0.0
    return max(0.0, (times[-1] + WINDOW - now).total_seconds())


def _lock_key(value: str) -> int:
    """A stable signed 32-bit key for `value` (the same in every process, unlike `hash`)."""
    return int.from_bytes(hashlib.sha256(value.encode()).digest()[:4], "big", signed=True)


def _serialize(session: Session, username: str, address: str) -> None:
    """On PostgreSQL, wait for other attempts on this username or address to commit (SQLite's
    write transaction already serializes every writer). Always the username's lock first, then the
    address's, so two attempts never deadlock waiting for each other's."""
    if session.get_bind().dialect.name != "postgresql":
        return
    for first, value in ((USERNAME_LOCK, username), (ADDRESS_LOCK, address)):
        session.execute(select(func.pg_advisory_xact_lock(first, _lock_key(value))))


def admit(session: Session, now: datetime, username: str, address: str) -> None:
    """Count this attempt as a failure for its username and address, or raise TooManyAttempts
    when either is over its limit; commits (or rolls back) before any password is checked.

    A success then clears the username's count (`clear`); a failure stays counted as it is.
    """
    username, address = username[:64], address[:64]
    begin_write(session)
    _serialize(session, username, address)
    wait = max(
        _wait(session, now, LoginFailure.username, username, PER_USERNAME),
        _wait(session, now, LoginFailure.address, address, PER_ADDRESS),
    )
    if wait > 0:
        session.rollback()
        raise TooManyAttempts(max(1, math.ceil(wait)))
    session.execute(delete(LoginFailure).where(LoginFailure.attempted_at <= now - WINDOW))
    session.add(LoginFailure(username=username, address=address, attempted_at=now))
    session.commit()


def clear(session: Session, username: str) -> None:
    """A successful sign-in forgets the username's failures; the caller commits."""
    session.execute(delete(LoginFailure).where(LoginFailure.username == username[:64]))
