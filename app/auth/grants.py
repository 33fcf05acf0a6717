"""Roles, grants and the one function every view and route uses to check them (docs/api.md)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.errors import NamespaceNotFound
from app.db import Membership, Namespace, User
from app.errors import Forbidden

RUN_READ = "run.read"
RUN_START = "run.start"
TRIGGER_MANAGE = "trigger.manage"
RUN_MANAGE = "run.manage"
WORKFLOW_DEPLOY = "workflow.deploy"
NAMESPACE_ADMIN = "namespace.admin"

_VIEWER = frozenset({RUN_READ})
_OPERATOR = _VIEWER | {RUN_START, TRIGGER_MANAGE, RUN_MANAGE}
_DEPLOYER = _OPERATOR | {WORKFLOW_DEPLOY}
_ADMIN = _DEPLOYER | {NAMESPACE_ADMIN}

ROLE_GRANTS: dict[str, frozenset[str]] = {
    "viewer": _VIEWER,
    "operator": _OPERATOR,
    "deployer": _DEPLOYER,
    "admin": _ADMIN,
}
ALL_GRANTS = _ADMIN


def grants_of(session: Session, user: User, namespace: Namespace) -> frozenset[str]:
    """Every grant `user` holds in `namespace` (none for a disabled user)."""
    if user.disabled_at is not None or user.is_superuser:
        return grants_of_role(user, None)
    role = session.scalar(
        select(Membership.role).where(
            Membership.user_id == user.id, Membership.namespace_id == namespace.id
        )
    )
    return grants_of_role(user, role)


def grants_of_role(user: User, role: str | None) -> frozenset[str]:
    """Every grant `user` holds where its role is `role` (None: no role)."""
    if user.disabled_at is not None:
        return frozenset()
    if user.is_superuser:
        return ALL_GRANTS
    return ROLE_GRANTS.get(role or "", frozenset())


def has_grant(session: Session, user: User, namespace: Namespace, grant: str) -> bool:
    return grant in grants_of(session, user, namespace)


def require_grant(session: Session, user: User, namespace: Namespace, *grants: str) -> None:
    """Raise `Forbidden` naming the first of `grants` that `user` lacks in `namespace`.

    A user with no role there gets the same `NamespaceNotFound` as for a namespace that does
    not exist, so namespace names cannot be probed.
    """
    check_grants(grants_of(session, user, namespace), namespace, *grants)


def check_grants(held: frozenset[str], namespace: Namespace, *grants: str) -> None:
    """`require_grant` for grants already known to be `held`."""
    if not held:
        raise NamespaceNotFound(namespace.name)
    for grant in grants:
        if grant not in held:
            raise Forbidden(grant, namespace.name)
