"""Server-side console sessions and failed sign-ins (console sessions and login throttling)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime


class ConsoleSession(Base):
    """One signed-in browser. The cookie holds a random token; only its sha256 is stored, so a
    copy of the database cannot be replayed as a session."""

    __tablename__ = "console_sessions"
    __table_args__ = (Index("ix_console_sessions_user_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class LoginFailure(Base):
    """One failed sign-in, counted per username and per client address within a window."""

    __tablename__ = "login_failures"
    __table_args__ = (
        Index("ix_login_failures_username_at", "username", "attempted_at"),
        Index("ix_login_failures_address_at", "address", "attempted_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64))
    address: Mapped[str] = mapped_column(String(64))
    attempted_at: Mapped[datetime] = mapped_column(UTCDateTime())
