"""Login throttling, kept in the database so every process sees the same counts.

After 5 failures for one username within 15 minutes, or 30 from one client address, further
attempts are refused until the oldest counted failure leaves the window. The check runs before
the password hash is computed, so refused attempts cost almost nothing.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.db import LoginFailure
from app.errors import AlmanacError

WINDOW = timedelta(minutes=15)
PER_USERNAME = 5
PER_ADDRESS = 30


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


def check(session: Session, now: datetime, username: str, address: str) -> None:
    """Raise TooManyAttempts when this username or address is over its limit."""
    wait = max(
        _wait(session, now, LoginFailure.username, username, PER_USERNAME),
        _wait(session, now, LoginFailure.address, address, PER_ADDRESS),
    )
    if wait > 0:
        raise TooManyAttempts(max(1, math.ceil(wait)))


def record_failure(session: Session, now: datetime, username: str, address: str) -> None:
    """Count one failure (and forget failures older than the window); the caller commits."""
    session.execute(delete(LoginFailure).where(LoginFailure.attempted_at <= now - WINDOW))
    session.add(LoginFailure(username=username[:64], address=address[:64], attempted_at=now))


def clear(session: Session, username: str) -> None:
    """A successful sign-in forgets the username's failures; the caller commits."""
    session.execute(delete(LoginFailure).where(LoginFailure.username == username))
