"""Errors raised by the accounts and namespaces services."""

from __future__ import annotations

from app.errors import Conflict, NotFound


class NamespaceNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"namespace {name!r} does not exist", namespace=name)


class UserNotFound(NotFound):
    def __init__(self, username: str) -> None:
        super().__init__(f"user {username!r} does not exist", username=username)


class TokenNotFound(NotFound):
    def __init__(self, username: str, name: str) -> None:
        super().__init__(f"user {username!r} has no token named {name!r}", token=name)


class AlreadyExists(Conflict):
    def __init__(self, what: str, name: str) -> None:
        super().__init__(f"{what} {name!r} already exists", **{what: name})
