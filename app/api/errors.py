"""Map domain errors and HTTP errors to the JSON error body (docs/api.md), for every `/api` path.

The statuses come from `app/errors.py`, the table the console shares; the console's HTML error
pages live in `app/console/errors.py`.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from sqlalchemy.exc import OperationalError, ProgrammingError
from werkzeug.exceptions import HTTPException, NotFound

from app.calendar import CalendarError, SpecRangeError
from app.db.session import is_refusal, log_refused
from app.errors import AlmanacError, BackendBusy, CapacityExceeded, DatabaseRefused

log = logging.getLogger(__name__)

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


_SLASHES = re.compile(r"/{2,}")


def is_api_path(path: str) -> bool:
    """`/api` and everything under it, however many slashes separate the parts and whatever
    dot segments lead to it (`//api/v1` and `/./api/v1` are refused as API paths, in JSON, not
    with the console's page)."""
    path = posixpath.normpath(_SLASHES.sub("/", path))
    return path == "/api" or path.startswith("/api/")


# An error's message quotes what was refused (a key, a value): past this many characters the
# quote is cut, so a 300,000-character key is not sent back twice in a 600 KB answer.
MESSAGE_LIMIT = 1_000


def _cut(message: Any) -> Any:
    if not isinstance(message, str) or len(message) <= MESSAGE_LIMIT:
        return message
    return f"{message[:MESSAGE_LIMIT]}… ({len(message):,} characters in all)"


def _cut_error(error: Any) -> Any:
    """An error of `details.errors` with its `msg` cut, and each name in its `loc` (a key sent
    may be the huge thing)."""
    if not isinstance(error, dict):
        return error
    cut = dict(error)
    if "msg" in cut:
        cut["msg"] = _cut(cut["msg"])
    if isinstance(cut.get("loc"), list):
        cut["loc"] = [_cut(part) for part in cut["loc"]]
    return cut


def _cut_details(details: dict[str, Any]) -> dict[str, Any]:
    """The details with each text in them cut: their own (`reason`) and each error's `msg`."""
    cut = {key: _cut(value) for key, value in details.items()}
    errors = details.get("errors")
    if isinstance(errors, list):
        cut["errors"] = [_cut_error(error) for error in errors]
    return cut


def error_response(status: int, code: str, message: str, details: dict[str, Any]) -> Response:
    body = {"code": code, "message": _cut(message), "details": _cut_details(details)}
    response = jsonify({"error": body})
    response.status_code = status
    return response


def _from_domain(exc: AlmanacError) -> Response:
    response = error_response(exc.http_status, exc.code, exc.message, exc.details)
    if isinstance(exc, CapacityExceeded | BackendBusy):
        response.headers["Retry-After"] = str(exc.retry_after)
    if exc.http_status == 401:
        # What a 401 must say (RFC 9110): how to authenticate.
        response.headers["WWW-Authenticate"] = 'Bearer realm="almanac"'
    return response


def _from_http(exc: HTTPException) -> Response:
    status = exc.code or 500
    code = CODE_BY_STATUS.get(status, "INTERNAL" if status >= 500 else "BAD_REQUEST")
    response = error_response(status, code, exc.description or exc.name, {})
    # The headers the status carries: a 405's `Allow` (the methods the path takes).
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def _database_refused(exc: ProgrammingError | OperationalError) -> Response:
    """A statement the database refused: a login without its grants or a schema not migrated
    is the operator's to fix (503 and one line saying what to check, every request alike, no
    traceback); any other refused statement is a bug (500, logged with its traceback)."""
    if not is_refusal(exc):
        return _unexpected(exc)
    log_refused(log, f"{request.method} {request.path}", exc)
    return _from_domain(DatabaseRefused())


def _database_unavailable(exc: OperationalError) -> Response:
    if is_refusal(exc):
        # SQLite's "no such table": a file that was never migrated, not an outage.
        return _database_refused(exc)
    # The database went away (restart, failover, dropped connection) or timed out: the client
    # may retry, and the pool reconnects on its own (pre-ping), so this is not an internal error.
    log.warning("database unavailable on %s %s: %s", request.method, request.path, exc.orig)
    return _from_domain(BackendBusy("the database is unavailable or busy; retry shortly"))


def _unexpected(exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(500, "INTERNAL", "an internal error occurred; it was logged", {})


def register(bp: Blueprint) -> None:
    """Answer every error raised in `bp` with the JSON error body, never HTML."""
    bp.register_error_handler(AlmanacError, _from_domain)
    bp.register_error_handler(CalendarError, _calendar_response)
    bp.register_error_handler(SpecRangeError, _calendar_response)
    bp.register_error_handler(HTTPException, _from_http)
    bp.register_error_handler(OperationalError, _database_unavailable)
    bp.register_error_handler(ProgrammingError, _database_refused)
    bp.register_error_handler(Exception, _unexpected)


def init_app(app: Flask) -> None:
    """JSON for `/api` paths no blueprint matched (404, 405); other paths get the page the
    console registered as `almanac.error_page` (its error layout), else Flask's own."""

    @app.before_request
    def _no_leading_doubled_slash() -> None:
        """`//api/v1/schedules` is not found, as `/api/v1//schedules` is (the router reads a
        path's leading slashes as one)."""
        if request.environ.get("PATH_INFO", "").startswith("//"):
            raise NotFound()

    @app.errorhandler(HTTPException)
    def _routing(exc: HTTPException) -> Response | HTTPException:
        if is_api_path(request.environ.get("PATH_INFO") or request.path):
            return _from_http(exc)
        error_page = current_app.extensions.get("almanac.error_page")
        return error_page(exc) if error_page else exc  # type: ignore[no-any-return]

    @app.errorhandler(AlmanacError)
    def _refused_outside(exc: AlmanacError) -> Any:
        """A refusal raised where no blueprint's handlers apply: the app's own request checks
        (NUL in the path) on a path no route matched, or on a static file."""
        if is_api_path(request.path):
            return _from_domain(exc)
        refusal_page = current_app.extensions.get("almanac.refusal_page")
        if refusal_page:
            return refusal_page(exc)
        return error_response(exc.http_status, exc.code, exc.message, exc.details)

    @app.after_request
    def _no_html_from_api(response: Response) -> Response:
        """Flask's own answers that no handler sees stay JSON on `/api` paths: `OPTIONS`
        answers 204 with `Allow` and no body (it was an empty `text/html` page), and a routing
        redirect carries the JSON body of its status."""
        if not is_api_path(request.path) or response.mimetype != "text/html":
            return response
        if request.method == "OPTIONS" and response.status_code == 200:
            response.status_code = 204
            response.set_data(b"")
            del response.headers["Content-Type"]
            return response
        replaced = error_response(
            response.status_code,
            CODE_BY_STATUS.get(response.status_code, "BAD_REQUEST"),
            response.status,
            {},
        )
        for name in ("Location", "Allow"):
            if name in response.headers:
                replaced.headers[name] = response.headers[name]
        return replaced


@contextmanager
def located(*prefix: str | int) -> Iterator[None]:
    """Re-raise calendar errors with their location under `prefix` (e.g. the `spec` field)."""
    try:
        yield
    except CalendarError as exc:
        raise CalendarError(exc.msg, loc=(*prefix, *exc.loc), code=exc.code) from exc


def _calendar_response(exc: CalendarError | SpecRangeError) -> Response:
    if isinstance(exc, SpecRangeError):
        details = {"errors": [{"loc": list(exc.loc), "msg": exc.msg}]}
        return error_response(422, "SCHEDULE_RANGE", str(exc), details)
    loc = list(exc.loc)
    message = exc.located()
    return error_response(422, exc.code, message, {"errors": [{"loc": loc, "msg": exc.msg}]})
