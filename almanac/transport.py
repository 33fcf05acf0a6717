"""HTTP for both clients: headers, retries honouring Retry-After, and typed errors.

The token is only ever placed in the Authorization header; nothing here logs requests, and the
clients' `repr` leaves the token out.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from almanac.errors import AlmanacError, ConnectionFailed, NoAnswer, from_body
from almanac.models import ShapeError
from almanac.version import VERSION

T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 503})
# Below the 2 s after which gunicorn closes an idle kept-alive connection.
KEEPALIVE_SECONDS = 1.0
MAX_RETRY_AFTER = 60.0
BASE_BACKOFF = 0.5


@dataclass(frozen=True)
class Call:
    """One request under `/api/v1`: the operations build these, the transports send them."""

    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    json: Any = None
    headers: dict[str, str | bytes] = field(default_factory=dict)


def query_pairs(params: Any) -> list[tuple[str, str]]:
    """`request`'s `params=`: a mapping (a list or tuple value repeats its key, as `label`
    takes), or (key, value) pairs already."""
    if not params:
        return []
    if isinstance(params, Mapping):
        pairs: list[tuple[str, str]] = []
        for key, value in params.items():
            values = value if isinstance(value, list | tuple) else [value]
            pairs.extend((key, each) for each in values)
        return pairs
    return [(key, value) for key, value in params]


TOO_DEEP = "the request body nests too deeply to be encoded as JSON (the API takes 64 levels)"


def request_options(call: Call) -> dict[str, Any]:
    """The keyword arguments of httpx's `request` for `call`, with its body encoded here.

    A body is JSON in UTF-8, like httpx's own; one holding a string that is not Unicode text (a
    lone surrogate, which UTF-8 cannot encode) is sent with escapes instead, so the server
    answers with the field it refuses rather than the client failing with an encoding error.
    A body nested too deeply to encode is a `ValueError` before any request.
    """
    options: dict[str, Any] = {"params": call.params, "headers": call.headers}
    if call.json is None:
        return options
    try:
        body = json.dumps(call.json, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        # The caller's own object, deeper than Python's encoder goes (the API takes 64 levels):
        # a clear ValueError before any request, as for any other value JSON cannot carry.
        raise ValueError(TOO_DEEP) from None
    try:
        options["content"] = body.encode("utf-8")
    except UnicodeEncodeError:
        options["content"] = json.dumps(
            call.json, ensure_ascii=True, separators=(",", ":"), allow_nan=False
        ).encode("ascii")
    options["headers"] = {**call.headers, "Content-Type": "application/json"}
    return options


def default_headers(token: str | None, source: str) -> dict[str, str]:
    headers = {
        "Accept": "application/json",
        "User-Agent": f"almanac-client/{VERSION}",
        # Informational: the server records it as the audit `source` of changes.
        "X-Almanac-Source": source,
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


API_PREFIX = "/api/v1"


def api_base(url: str) -> str:
    """The API's root under the server's URL. A URL that already ends with the API's prefix
    (`http://host:8000/api/v1`, copied from a request) is taken as that root: the prefix added
    again answered every call with a bare 404."""
    base = url.rstrip("/")
    return base if base.endswith(API_PREFIX) else base + API_PREFIX


def http_options(url: str, token: str | None, timeout: float, source: str) -> dict[str, Any]:
    """The settings of the httpx client, checked first so a bad URL or token fails clearly.

    A URL that cannot be parsed is `ConnectionFailed` (no server can be reached at it); a token
    that is not printable ASCII cannot go in a header (the server issues only ASCII tokens), and
    a URL with a user or password would send them instead of the token: both are `ValueError`.
    """
    if token is not None and not (token.isascii() and token.isprintable()):
        raise ValueError("the token must be printable ASCII text, as the server issues tokens")
    scheme = SCHEME.match(url.strip())
    if scheme is None or scheme.group(1).lower() not in ("http", "https"):
        # First: `mailto:x@y` names no server at all, whatever its `@` looks like. A URL that
        # may hold a password (`ftp://user:pw@host`) is not repeated.
        shown = "the URL given" if has_credentials(url) else url
        raise ConnectionFailed("CONNECTION", f"cannot reach {shown}: not a valid URL ({NOT_HTTP})")
    if has_credentials(url):
        # Never echoed: the URL holds a password. httpx would send it as Basic auth instead of
        # the token, so it is refused rather than stripped.
        raise ValueError(
            "the URL holds a user name or password (user:password@host): the server takes only "
            "the token; give the URL without them"
        )
    base = api_base(url)
    problem: str | None
    try:
        # The API's path goes after the URL's own: a query or a fragment, even an empty one
        # (`http://host/?`), would swallow it.
        if "?" in url or "#" in url:
            problem = "it has a query or a fragment; give the server's address only"
        else:
            problem = url_problem(httpx.URL(base))
    except httpx.InvalidURL as exc:
        problem = str(exc)
    if problem:
        raise ConnectionFailed("CONNECTION", f"cannot reach {url}: not a valid URL ({problem})")
    return {
        "base_url": base,
        "headers": default_headers(token, source),
        "timeout": timeout,
        # Servers close idle connections (gunicorn after 2 s): drop ours before they do.
        "limits": httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS),
    }


# A URL's scheme as RFC 3986 spells it: a letter, then letters, digits, `+`, `-` or `.`.
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
NOT_HTTP = "it must start with http:// or https://"


def has_credentials(url: str) -> bool:
    """Whether `url` names a user or password before its host (`http://user:pw@host`)."""
    # The authority as RFC 3986 cuts it, so a URL too broken to parse is checked as well.
    text = url.strip()
    authority = re.split(r"[/?#]", text.partition("//")[2] or text, maxsplit=1)[0]
    return "@" in authority


def url_problem(url: httpx.URL) -> str | None:
    """Why no server can be reached at `url` (httpx parses all of these and fails later)."""
    if url.scheme not in ("http", "https"):
        return NOT_HTTP
    if not url.host:
        return "it names no host"
    if url.port is not None and not 1 <= url.port <= 65535:
        return f"port {url.port} is not between 1 and 65535"
    return None


def resend(call: Call, exc: Exception, resent: bool) -> bool:
    """Whether to send `call` again after `exc`: once, for a read (GET or HEAD) whose kept-alive
    connection the server closed as it was reused ("disconnected without a response"). A
    change is never sent twice: the server may have made it."""
    return (
        not resent and call.method in ("GET", "HEAD") and isinstance(exc, httpx.RemoteProtocolError)
    )


def retry_delay(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before retrying: the server's Retry-After, else exponential backoff."""
    header = response.headers.get("Retry-After", "").strip()
    if header.isdigit():
        return min(float(header), MAX_RETRY_AFTER)
    if header:
        try:
            when = email.utils.parsedate_to_datetime(header)
            return max(0.0, min((when - datetime.now(UTC)).total_seconds(), MAX_RETRY_AFTER))
        except (TypeError, ValueError):
            pass
    return float(BASE_BACKOFF * (2**attempt))


def decode(response: httpx.Response) -> Any:
    """The JSON body of a success, or the typed exception of an error."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        raise from_body(response.status_code, body, response.headers.get("Content-Type", ""))
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError as exc:
        raise AlmanacError(
            "BAD_RESPONSE", "the server answered with something that is not JSON", {}
        ) from exc


def parsed(parse: Callable[[Any], T], body: Any, call: Call) -> T:
    """`parse(body)`; a body without the shape the route answers is BAD_RESPONSE, not a crash."""
    try:
        return parse(body)
    except ShapeError as exc:
        raise bad_response(call, str(exc)) from exc
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise bad_response(call) from exc


def page_body(body: Any, key: str, call: Call) -> dict[str, Any]:
    """A page of a list: an object whose `key` holds a list of objects, else BAD_RESPONSE."""
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise bad_response(call, f"a page needs {key!r}, a list of objects")
    return body


def bad_response(call: Call, reason: str | None = None) -> AlmanacError:
    message = f"the answer to {call.method} {call.path} does not have the API's shape"
    return AlmanacError("BAD_RESPONSE", f"{message} ({reason})" if reason else message, {})


# Failures before the request left this machine: the server cannot have acted on it.
NOT_SENT = httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol


def connection_error(exc: Exception, url: str, call: Call) -> AlmanacError:
    """`ConnectionFailed` when the request never reached the server; `NoAnswer` when it was
    sent and the answer did not come (a read timeout, a dropped connection): a change may have
    been made, and a client that read "cannot reach" would send it again."""
    # httpx's async timeouts have no text of their own: name the kind instead.
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, NOT_SENT | httpx.InvalidURL):
        return ConnectionFailed("CONNECTION", f"cannot reach {url}: {reason}")
    return NoAnswer(
        "NO_ANSWER",
        f"sent {call.method} {call.path} to {url} but got no answer ({reason}): the server may "
        "have done it; check before sending it again",
    )


def retryable(call: Call, response: httpx.Response) -> bool:
    """Whether a 429 or 503 may be sent again: a read always (but for `DATABASE_REFUSED`); a
    change only when the API said so itself (`CAPACITY`, `BACKEND_BUSY`: nothing was
    written). A proxy's own 503 may come after the server acted, so a change is not sent twice
    on its word."""
    if response.status_code not in RETRY_STATUSES:
        return False
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    code = error.get("code") if isinstance(error, dict) else None
    if code == "DATABASE_REFUSED":
        # The server's database refused it for want of a grant or a migration: it answers the
        # same until an operator acts, so waiting and asking again only delays the error.
        return False
    if call.method in ("GET", "HEAD"):
        return True
    return code in ("CAPACITY", "BACKEND_BUSY")


# After refusing a body as too large, the server reads a little more of it and closes the
# connection, though its answer said keep-alive: the next request sent on that connection
# would meet the close and read as "sent, no answer" for a change that never ran.
CLOSES_AFTER = frozenset({413})


class SyncTransport:
    def __init__(self, url: str, token: str | None, timeout: float, retries: int, source: str):
        self.url = url
        self.retries = retries
        self.options = http_options(url, token, timeout, source)
        self.http = httpx.Client(**self.options)

    def send(self, call: Call) -> Any:
        attempt, resent = 0, False
        while True:
            try:
                response = self.http.request(call.method, call.path, **request_options(call))
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                if resend(call, exc, resent):
                    resent = True
                    continue
                raise connection_error(exc, self.url, call) from exc
            if response.status_code in CLOSES_AFTER:
                # A fresh pool: the next request goes on a new connection.
                self.http.close()
                self.http = httpx.Client(**self.options)
            if attempt < self.retries and retryable(call, response):
                time.sleep(retry_delay(response, attempt))
                attempt += 1
                continue
            return decode(response)

    def close(self) -> None:
        self.http.close()
