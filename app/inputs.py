"""Parsing untrusted text the same way on every face: ASCII integers and depth-bounded JSON.

`str.isdigit` accepts `²` and other digits `int` refuses, and Python's JSON decoder recurses, so
both turned odd input into 500s; these functions turn it into validation errors instead.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from typing import Any

from flask import Flask, Response, current_app, request

from app.errors import BadRequest, ValidationFailed

MAX_JSON_DEPTH = 64
# Far beyond any id, count or sequence, and inside a 64-bit column.
_ASCII_INT = re.compile(r"[0-9]{1,18}", re.ASCII)
_SIGNED_INT = re.compile(r"-?[0-9]{1,18}", re.ASCII)


def ascii_int(raw: str, *, signed: bool = False) -> int | None:
    """`raw` as an integer if it is 1-18 ASCII digits (optionally with a leading `-`), else None."""
    pattern = _SIGNED_INT if signed else _ASCII_INT
    return int(raw) if pattern.fullmatch(raw) else None


class _Refused(ValueError):
    """A JSON value this module's hooks refuse, with a message meant for the client."""


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refused when it is too large for one (`1e400` would become
    infinity, which neither JSON nor PostgreSQL's json can hold)."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 32 else text[:32] + "…"
        raise _Refused(f"the number {shown} is too large to store")
    return value


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON in UTF-8: how every size limit on stored JSON counts
    (inputs, payloads, outputs), so a value one limit accepts another measures the same."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (a scalar is 0), without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return deepest
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each given once: `{"count": 1, "count": 2}` is refused, not
    read as its last value (a proxy or validator reading the first would see another request)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {key!r} is given twice in one object")
            seen.add(key)
    return value


def loads(raw: str | bytes, loc: list[str | int]) -> Any:
    """Parse JSON text; malformed text is 400, nesting deeper than 64 levels is 422 naming `loc`.

    `NaN` and `Infinity` are refused: they are not JSON and PostgreSQL cannot store them; so is
    a number too large for a float (`1e400`), which would become infinity, and an object that
    gives one key twice.
    """
    try:
        value = json.loads(
            raw,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        value = None
        too_deep = True
    except json.JSONDecodeError as exc:
        reason = f"is not valid JSON: {exc.msg} (line {exc.lineno})"
        raise BadRequest(f"{_where(loc)} {reason}", reason=reason) from None
    except UnicodeDecodeError as exc:
        # Python's own words ("'utf-8' codec can't decode byte 0xff in position 31: invalid
        # start byte") are its internals: say what is wrong and where, plainly.
        reason = f"is not valid {exc.encoding.upper()} (at byte {exc.start})"
        raise BadRequest(f"{_where(loc)} {reason}", reason=reason) from None
    except _Refused as exc:
        reason = f"is not valid JSON: {exc}"
        raise BadRequest(f"{_where(loc)} {reason}", reason=reason) from None
    except ValueError:
        # The only other ValueError: an integer longer than Python converts (its message told
        # the client to call sys.set_int_max_str_digits()).
        limit = sys.get_int_max_str_digits()
        reason = f"holds an integer of more than {limit} digits, which is not accepted"
        raise BadRequest(f"{_where(loc)} {reason}", reason=reason) from None
    else:
        too_deep = json_depth(value) > MAX_JSON_DEPTH
    if too_deep:
        msg = f"JSON may nest at most {MAX_JSON_DEPTH} levels deep"
        raise ValidationFailed([{"loc": loc, "msg": msg}])
    # Only an escape can put NUL or a lone surrogate in parsed JSON (a raw NUL is not valid JSON
    # text), except that bytes are decoded with surrogates passed through: check those too.
    suspect = _ESCAPE in raw if isinstance(raw, bytes) else _ESCAPE.decode() in raw
    if suspect or (isinstance(raw, bytes) and _SURROGATE_LEAD in raw):
        found = unstorable_at(value, loc)
        if found is not None:
            raise ValidationFailed([{"loc": found[0], "msg": found[1]}])
    return value


_ESCAPE = b"\\u"
_SURROGATE_LEAD = b"\xed"
NUL_MESSAGE = "must not contain the NUL character (\\u0000)"
SURROGATE_MESSAGE = (
    "must not contain a lone surrogate (\\ud800-\\udfff): it is not valid Unicode text"
)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def unstorable_at(value: Any, loc: list[str | int]) -> tuple[list[str | int], str] | None:
    """Where in parsed JSON a string (a value or a key) holds a character no database can
    store as text (NUL, which no text column of PostgreSQL holds, or a lone surrogate, which
    is not Unicode text and fails every encoder), with the message; None when none does.
    Iterative, like `json_depth`."""
    stack: list[tuple[Any, list[str | int]]] = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return where, _unstorable_message(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if _UNSTORABLE.search(key):
                    # Named as sent, a lone surrogate shown as U+FFFD so the error body is text.
                    shown = _SURROGATES.sub("\ufffd", key)
                    return [*where, shown], _unstorable_message(key)
                stack.append((child, [*where, key]))
        elif isinstance(item, list):
            stack.extend((child, [*where, index]) for index, child in enumerate(item))
    return None


def storable(text: str) -> str:
    """`text` with each character no database can store as text (NUL, a lone surrogate)
    replaced by U+FFFD: for messages Almanac writes itself, such as an action's exception."""
    return _UNSTORABLE.sub("\ufffd", text)


def _unstorable_message(text: str) -> str:
    return NUL_MESSAGE if "\x00" in text else SURROGATE_MESSAGE


def refuse_nul_in_request() -> None:
    """422 naming the part of this request (its path, a query or form field) holding NUL,
    before any statement could fail on it (a `before_request` hook of the app)."""
    if "\x00" in request.path:
        raise ValidationFailed([{"loc": ["path"], "msg": NUL_MESSAGE}])
    parts = [("query", request.args)]
    if request.mimetype in FORM_TYPES:
        parts.append(("form", request.form))
    for part, fields in parts:
        for key, value in fields.items(multi=True):
            if "\x00" in key or "\x00" in value:
                loc = [part, key.replace("\x00", "")]
                raise ValidationFailed([{"loc": loc, "msg": NUL_MESSAGE}])


FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


def _where(loc: list[str | int]) -> str:
    return ".".join(map(str, loc)) or "the body"


def drain_unread_body(response: Response) -> Response:
    """Read what the request sent and nobody read (an `after_request` hook of the app).

    A 404, a 405 or a refusal before the body was parsed left it unread, and the server then
    closed the kept-alive connection: a client's next request on it, a change perhaps, met the
    close and read as "sent, no answer". A body over the limit is not read (413: the server
    closes that connection, as docs/api.md says).
    """
    length = request.content_length
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if length and (limit is None or length <= int(limit)):
        stream = request.stream
        while stream.read(64 * 1024):
            pass
    return response


def bound_streamed_bodies(app: Flask) -> None:
    """Hold a body sent without Content-Length (chunked) to the same limit as one with it.

    Werkzeug stops reading such a stream at `MAX_CONTENT_LENGTH` without noticing that more
    follows, so a request past the limit was cut there and parsed. The body is read here (at
    most one byte past the limit) and handed on with its length, so the usual check answers 413
    for a longer one, on every face, and nothing is written.
    """
    inner = app.wsgi_app
    limit = int(app.config["MAX_CONTENT_LENGTH"])

    def wsgi_app(environ: dict[str, Any], start_response: Any) -> Any:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            body = environ["wsgi.input"].read(limit + 1)
            environ["wsgi.input"] = io.BytesIO(body if len(body) <= limit else b"")
            # Werkzeug ignores the length of a request that says it is chunked.
            del environ["HTTP_TRANSFER_ENCODING"]
            environ["CONTENT_LENGTH"] = str(len(body))
        return inner(environ, start_response)

    app.wsgi_app = wsgi_app  # type: ignore[method-assign]
