"""Domain errors shared by every service, and the one table both faces map `code` to HTTP with."""

from __future__ import annotations

from typing import Any

HTTP_STATUS = {
    "BAD_REQUEST": 400,
    "INVALID_CURSOR": 400,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "CONFLICT": 409,
    "SCHEDULE_REVISION": 409,
    "SCHEDULE_DELETED": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "VALIDATION": 422,
    "CALENDAR_INVALID": 422,
    "SCHEDULE_RANGE": 422,
    "INPUT_SCHEMA": 422,
    "BACKFILL_TOO_LARGE": 422,
    "CAPACITY": 429,
    "INTERNAL": 500,
    "BACKEND_BUSY": 503,
    "DATABASE_REFUSED": 503,
}


class AlmanacError(Exception):
    """Base of every domain error: a stable `code`, a message, and JSON-able details."""

    code = "BAD_REQUEST"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    @property
    def http_status(self) -> int:
        """The HTTP status both faces answer this error with."""
        return HTTP_STATUS.get(self.code, 400)


class BadRequest(AlmanacError):
    code = "BAD_REQUEST"


class InvalidCursor(AlmanacError):
    code = "INVALID_CURSOR"


class Unauthenticated(AlmanacError):
    code = "UNAUTHENTICATED"


class Forbidden(AlmanacError):
    code = "FORBIDDEN"

    def __init__(self, grant: str, namespace: str | None = None) -> None:
        where = f" in namespace {namespace!r}" if namespace else ""
        super().__init__(f"this needs the {grant!r} grant{where}", grant=grant, namespace=namespace)


class NotFound(AlmanacError):
    code = "NOT_FOUND"


class Conflict(AlmanacError):
    code = "CONFLICT"


class ValidationFailed(AlmanacError):
    """Input that does not fit its model; `errors` is a list of `{loc, msg}`."""

    code = "VALIDATION"

    def __init__(self, errors: list[dict[str, Any]], message: str | None = None) -> None:
        first = errors[0] if errors else {"loc": [], "msg": "invalid"}
        where = ".".join(str(part) for part in first["loc"]) or "body"
        super().__init__(message or f"{where}: {first['msg']}", errors=errors)
        self.errors = errors


class CapacityExceeded(AlmanacError):
    code = "CAPACITY"

    def __init__(self, message: str, retry_after: int = 1, **details: Any) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after


class DatabaseRefused(AlmanacError):
    """The database answered but refused the statement for what only an operator can fix: the
    server's login lacks a grant, or the database is not migrated. Retrying does not help."""

    code = "DATABASE_REFUSED"
    MESSAGE = (
        "the database refused this request's statement: the server's database login lacks a "
        "grant or the database is not migrated; an operator should check the login's grants "
        "(`flask --app wsgi db upgrade` run as the owner grants them) and that the database is "
        "migrated"
    )

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class BackendBusy(AlmanacError):
    code = "BACKEND_BUSY"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after
