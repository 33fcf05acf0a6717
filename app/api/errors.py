"""Map domain errors and HTTP errors to the SPEC §7 JSON error body, for every `/api` path."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from app.calendar import CalendarError, SpecRangeError
from app.errors import AlmanacError, BackendBusy, CapacityExceeded

log = logging.getLogger(__name__)

STATUS_BY_CODE = {
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
}
CODE_BY_STATUS = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "BAD_REQUEST",
    422: "VALIDATION",
    429: "CAPACITY",
}


def error_response(status: int, code: str, message: str, details: dict[str, Any]) -> Response:
    response = jsonify({"error": {"code": code, "message": message, "details": details}})
    response.status_code = status
    return response


def _from_domain(exc: AlmanacError) -> Response:
    status = STATUS_BY_CODE.get(exc.code, 400)
    response = error_response(status, exc.code, exc.message, exc.details)
    if isinstance(exc, CapacityExceeded | BackendBusy):
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _is_api() -> bool:
    return request.path.startswith("/api/")


def register(app: Flask) -> None:
    """Install the handlers; non-API paths keep Flask's own error pages."""

    @app.errorhandler(AlmanacError)
    def _domain(exc: AlmanacError) -> Any:
        if _is_api():
            return _from_domain(exc)
        status = STATUS_BY_CODE.get(exc.code, 400)
        return render_template("error.html", status=status, message=exc.message), status

    @app.errorhandler(CalendarError)
    @app.errorhandler(SpecRangeError)
    def _calendar(exc: CalendarError | SpecRangeError) -> Any:
        if _is_api():
            return _calendar_response(exc)
        return render_template("error.html", status=422, message=str(exc)), 422

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Any:
        if not _is_api():
            return exc
        status = exc.code or 500
        code = CODE_BY_STATUS.get(status, "INTERNAL" if status >= 500 else "BAD_REQUEST")
        return error_response(status, code, exc.description or exc.name, {})

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Any:
        log.exception("unhandled error on %s %s", request.method, request.path)
        if not _is_api():
            return render_template("error.html", status=500, message="Internal error"), 500
        return error_response(500, "INTERNAL", "an internal error occurred; it was logged", {})


@contextmanager
def located(*prefix: str | int) -> Iterator[None]:
    """Re-raise calendar errors with their location under `prefix` (e.g. the `spec` field)."""
    try:
        yield
    except CalendarError as exc:
        raise CalendarError(exc.msg, loc=(*prefix, *exc.loc), code=exc.code) from exc


def _calendar_response(exc: CalendarError | SpecRangeError) -> Response:
    if isinstance(exc, SpecRangeError):
        return error_response(422, "SCHEDULE_RANGE", str(exc), {})
    loc = list(exc.loc)
    message = f"{'.'.join(map(str, loc))}: {exc.msg}" if loc else exc.msg
    return error_response(422, exc.code, message, {"errors": [{"loc": loc, "msg": exc.msg}]})
