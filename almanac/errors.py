"""Typed exceptions for the server's error codes (`{"error": {"code", "message", "details"}}`)."""

from __future__ import annotations

from typing import Any


class AlmanacError(Exception):
    """An error answered by the server (or, for `ConnectionFailed`, no answer at all)."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status


class InvalidId(ValueError):
    """An id or namespace no request can name: one holding '/' (the server reads it as a path
    separator, so the request would reach another route) or empty. Raised before any request."""


class NotUnicode(InvalidId):
    """A string that is not Unicode text (a lone surrogate) where no request can carry it, such
    as an id in the path: raised before any request."""


class ConnectionFailed(AlmanacError):
    """The server could not be reached (refused, connect timed out, bad URL): the request was
    not sent, so nothing happened; no HTTP status."""


class NoAnswer(AlmanacError):
    """The request was sent but no answer came (it timed out, or the connection dropped): the
    server may have done it. Check before sending a change again. Code `NO_ANSWER`."""


class BadRequest(AlmanacError):
    """400: a malformed request or an invalid cursor."""


class Unauthenticated(AlmanacError):
    """401: no token, or an unknown, revoked or disabled one."""


class Forbidden(AlmanacError):
    """403: authenticated, but without the grant named in `details`."""


class NotFound(AlmanacError):
    """404: no such resource, or a namespace the caller has no role in."""


class Conflict(AlmanacError):
    """409: the resource's state forbids the change (deleted schedule, finished run, ...)."""


class RevisionConflict(Conflict):
    """409 SCHEDULE_REVISION: the If-Match revision is missing or stale."""

    @property
    def current_revision(self) -> int | None:
        value = self.details.get("current_revision")
        return value if isinstance(value, int) else None


class ValidationError(AlmanacError):
    """422: the body or a query parameter is invalid; `details["errors"]` names the fields."""


class CalendarInvalid(ValidationError):
    """422 CALENDAR_INVALID: a cron expression, time zone or interval is not valid."""


class CapacityExceeded(AlmanacError):
    """429 CAPACITY: the namespace is at its limit (retried first, honouring Retry-After)."""


class BackendBusy(AlmanacError):
    """503 BACKEND_BUSY: the database is busy (retried first, honouring Retry-After)."""


BY_CODE: dict[str, type[AlmanacError]] = {
    "BAD_REQUEST": BadRequest,
    "INVALID_CURSOR": BadRequest,
    "UNAUTHENTICATED": Unauthenticated,
    "FORBIDDEN": Forbidden,
    "NOT_FOUND": NotFound,
    "CONFLICT": Conflict,
    "SCHEDULE_DELETED": Conflict,
    "SCHEDULE_REVISION": RevisionConflict,
    "VALIDATION": ValidationError,
    "SCHEDULE_RANGE": ValidationError,
    "INPUT_SCHEMA": ValidationError,
    "BACKFILL_TOO_LARGE": ValidationError,
    "CALENDAR_INVALID": CalendarInvalid,
    "CAPACITY": CapacityExceeded,
    "BACKEND_BUSY": BackendBusy,
}
BY_STATUS: dict[int, type[AlmanacError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: ValidationError,
    429: CapacityExceeded,
    503: BackendBusy,
}


def from_body(status: int, body: Any, content_type: str) -> AlmanacError:
    """The typed exception of an error response.

    A body that is not the API's error (a proxy's or a web server's page, say) is BAD_RESPONSE
    naming the status and content type: its text is never repeated, since it may be a whole
    HTML page, or text a terminal would act on.
    """
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(error, dict) or not isinstance(code, str) or not code:
        kind = content_type.strip()[:100] or "no content type"
        message = f"the server answered {status} ({kind}) without the API's error body"
        return AlmanacError("BAD_RESPONSE", message, {}, status)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    cls = BY_CODE.get(code) or BY_STATUS.get(status, AlmanacError)
    return cls(code, str(error.get("message") or ""), details, status)
