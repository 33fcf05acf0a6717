"""The signed-in console user and the namespace context every page renders with."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask import g
from flask_login import UserMixin, current_user
from sqlalchemy.orm import Session

from app import context
from app.auth import service as auth_service
from app.auth import sessions as console_sessions
from app.auth.grants import grants_of, require_grant
from app.db import Namespace, User
from app.db.session import begin_write


class ConsoleUser(UserMixin):  # type: ignore[misc]
    """flask-login's view of a signed-in browser: the user and its server-side session token.

    flask-login keeps `get_id()` in the (signed) cookie, so that is the random session token:
    the cookie carries nothing derived from the password, and ending the row signs it out.
    """

    def __init__(self, user: User, token: str) -> None:
        self.user = user
        self.token = token

    def get_id(self) -> str:
        return self.token

    @classmethod
    def load(cls, session: Session, now: datetime, token: str) -> ConsoleUser | None:
        user = console_sessions.resolve(session, now, token)
        return None if user is None else cls(user, token)


@dataclass
class NamespaceView:
    """The namespace a page is about, the ones the user may switch to, and the user's grants."""

    current: Namespace
    choices: list[Namespace]
    grants: frozenset[str]

    def can(self, grant: str) -> bool:
        return grant in self.grants


def landing_namespace(user: User, choices: list[Namespace]) -> Namespace | None:
    """Where sign-in lands: the last namespace used, else `default`, else the first."""
    by_name = {namespace.name: namespace for namespace in choices}
    for name in (user.last_namespace, "default"):
        if name in by_name:
            return by_name[name]
    return choices[0] if choices else None


def namespace_view(name: str, *needs: str) -> NamespaceView:
    """Load namespace `name` for the signed-in user, requiring `needs` (403 otherwise).

    The view is also kept in `g`: from then on a refused action has a page to go back to.
    """
    session = context.session()
    user: User = current_user.user
    namespace = auth_service.get_namespace(session, name)
    require_grant(session, user, namespace, *needs)
    if user.last_namespace != namespace.name:
        # Remembered for the landing page; committed alone so a refused action keeps it too.
        # As a write transaction: on SQLite a read transaction that writes cannot wait for
        # the ticker's write lock, and the page would fail with "database is locked".
        begin_write(session)
        user.last_namespace = namespace.name
        session.commit()
    g.namespace_view = NamespaceView(
        namespace,
        auth_service.visible_namespaces(session, user),
        grants_of(session, user, namespace),
    )
    return g.namespace_view  # type: ignore[no-any-return]
