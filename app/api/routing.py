"""One decorator declares every API operation: its rules, its grant, and its OpenAPI entry."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flask import Blueprint, g, request
from pydantic import BaseModel, ValidationError

from app import context, inputs
from app.auth import service as auth_service
from app.auth.errors import NamespaceNotFound
from app.auth.grants import check_grants, grants_of_role, require_grant
from app.db import Namespace, User
from app.errors import BadRequest, Forbidden, Unauthenticated, ValidationFailed
from app.paging import decode_cursor, encode_cursor, filters_of
from app.schedules.audit import CommandContext, declared_request_id, declared_source

M = TypeVar("M", bound=BaseModel)


# A query parameter the OpenAPI document lists: its name, a description and, where the server
# accepts less than any string, the JSON schema of what it accepts.
QueryParam = tuple[str, str] | tuple[str, str, dict[str, Any]]


def one_of(values: Iterable[str]) -> dict[str, Any]:
    """The schema of a query parameter that is one of `values`."""
    return {"type": "string", "enum": list(values)}


def list_of(values: Iterable[str]) -> dict[str, Any]:
    """The schema of a comma-separated list of `values` (empty items ignored)."""
    word = "(?:" + "|".join(re.escape(value) for value in values) + ")"
    return {"type": "string", "pattern": f"^,*(?:{word}(?:,+{word})*)?,*$"}


# The schema of a query parameter the operation reads as often as it is given
# (`label=a:1&label=b:2`); every other one it reads once, and given more than once it is 422
# (`refuse_repeated`).
REPEATABLE: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


def repeatable(name: str, description: str) -> QueryParam:
    """A query parameter that may be given more than once, each value one more filter."""
    return (name, description, REPEATABLE)


def refuse_repeated(query: Iterable[QueryParam]) -> None:
    """422 naming each query parameter of `query` read once that this request gives more than
    once (an empty value counts: `status=&status=paused` is two). Read with `args.get`, all but
    the first value were silently dropped, and a list filtered on one of them answered rows
    of the other, or none."""
    errors = []
    for name, description, *schema in query:
        if schema and schema[0].get("type") == "array":
            continue
        count = len(request.args.getlist(name))
        if count > 1:
            msg = f"is given {count} times; give it once"
            if "comma-separated" in description:
                msg += " (several values go in one, comma-separated)"
            errors.append({"loc": ["query", name], "msg": msg})
    if errors:
        raise ValidationFailed(errors)


# What `If-Match` holds: a schedule's revision, bare or as its ETag gives it (ASCII digits).
IF_MATCH_TEXT = r'\s*(?:([0-9]{1,9})|(?:W/)?"([0-9]{1,9})")\s*'

# The two query parameters of every paged list.
PAGE: list[QueryParam] = [
    ("limit", "1-100, default 50"),
    ("cursor", "next_cursor of the last page"),
]

# A yes/no query parameter: the server also takes 1/0 and yes/no, in any case.
FLAG = {"type": "boolean"}
# What a yes/no query parameter (`FLAG`) accepts; absent or empty is no.
FLAG_WORDS = {
    "": False,
    "0": False,
    "false": False,
    "no": False,
    "1": True,
    "true": True,
    "yes": True,
}
# The yes/no query parameters: a cursor binds their meaning, not their spelling.
FLAG_PARAMS = frozenset({"include_deleted"})


@dataclass
class Operation:
    """What the OpenAPI document says about one method on one path."""

    method: str
    path: str
    summary: str
    grant: str | None
    auth: bool
    body: type[BaseModel] | None
    status: int
    query: list[QueryParam] = field(default_factory=list)
    namespaced: bool = False
    response: type[BaseModel] | None = None
    # Other success statuses answering the same body (a replaced schedule's 200 beside 201).
    also: tuple[int, ...] = ()
    # Whether the operation reads `If-Match` (a schedule's revision).
    if_match: bool = False


OPERATIONS: list[Operation] = []


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def current_user() -> User:
    """The user behind this request's bearer token, or 401."""
    if "api_user" not in g:
        _authenticate(None)
    return g.api_user  # type: ignore[no-any-return]


def _authenticate(namespace: str | None) -> auth_service.Caller:
    """Find the caller (and the namespace the request names) in one statement, or 401."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("send 'Authorization: Bearer <token>'")
    session = context.session()
    caller = auth_service.find_caller(session, token.strip(), namespace)
    if caller is None:
        raise Unauthenticated("the token is unknown, revoked, or its user is disabled")
    g.api_user = caller.user
    # On PostgreSQL the same statement bound the user's namespaces and read the clock,
    # which becomes this request's "now".
    context.act_as(caller.user.id, caller.bound_at)
    auth_service.record_token_use(session, context.now(), caller)
    return caller


def namespace_header() -> str | None:
    """`X-Namespace` as the client sent it. WSGI hands header values over decoded as latin-1,
    so `nsaа` (a Cyrillic а) read as `nsaÐ°` and a 404 named a namespace nobody asked for:
    the bytes are taken back and read as UTF-8 (a byte that is not UTF-8 shows as U+FFFD)."""
    raw = request.headers.get("X-Namespace")
    if raw is None or raw.isascii():
        return raw
    try:
        sent = raw.encode("latin-1")
    except UnicodeEncodeError:  # not from a WSGI server: already text
        return raw
    return sent.decode("utf-8", "replace")


def _namespace(
    user: User, name: str, caller: auth_service.Caller | None, grants: tuple[str, ...]
) -> Namespace:
    """The namespace the request names, once `user` is known to hold `grants` there."""
    session = context.session()
    if caller is None:
        namespace = auth_service.get_namespace(session, name)
        require_grant(session, user, namespace, *grants)
        return namespace
    if caller.namespace is None:
        raise NamespaceNotFound(name)
    check_grants(grants_of_role(user, caller.role), caller.namespace, *grants)
    return caller.namespace


def operation(
    bp: Blueprint,
    method: str,
    rule: str,
    *,
    summary: str,
    grant: str | tuple[str, ...] | None = None,
    auth: bool = True,
    superuser: bool = False,
    body: type[BaseModel] | None = None,
    status: int = 200,
    query: list[QueryParam] | None = None,
    namespaced: bool = False,
    response: type[BaseModel] | None = None,
    also: tuple[int, ...] = (),
    if_match: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a view; namespaced views get `namespace` and are also served at the bare path."""
    grants = (grant,) if isinstance(grant, str) else tuple(grant or ())

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapped(**kwargs: Any) -> Any:
            name = None
            if namespaced:
                name = kwargs.pop("ns", None) or namespace_header() or "default"
            if not (auth or grants or superuser or namespaced):
                refuse_repeated(query or ())
                return view(**kwargs)
            # The statement that finds the caller also finds the namespace and its role there.
            caller = _authenticate(name) if "api_user" not in g else None
            user = current_user()
            if superuser and not user.is_superuser:
                raise Forbidden("superuser")
            if name is not None:
                kwargs["namespace"] = _namespace(user, name, caller, grants)
            refuse_repeated(query or ())
            return view(**kwargs)

        rules = [f"/namespaces/<ns>{rule}", rule] if namespaced else [rule]
        for index, each in enumerate(rules):
            bp.add_url_rule(
                each, endpoint=f"{view.__name__}_{index}", view_func=wrapped, methods=[method]
            )
            OPERATIONS.append(
                Operation(
                    method=method.lower(),
                    path="/api/v1" + _openapi_path(each),
                    summary=summary,
                    grant=",".join(grants) or ("superuser" if superuser else None),
                    auth=auth or bool(grants) or superuser,
                    body=body,
                    status=status,
                    query=list(query or []),
                    namespaced=namespaced,
                    response=response,
                    also=also,
                    if_match=if_match,
                )
            )
        return wrapped

    return decorate


def json_object() -> dict[str, Any]:
    """The request body as a JSON object (an empty body is `{}`), else 400/422.

    A form-encoded body (`curl -d` without a JSON Content-Type) is 400 saying so: it was read
    as form fields before the view ran, and passed on as an empty object whose validation
    errors named fields the caller had sent.
    """
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        # Read as it came, a compressed body was refused as invalid JSON (gzip) or, worse, read
        # as plain text when it was not compressed after all (`br` on a plain body).
        msg = f"Content-Encoding {encoding!r} is not supported: send the body uncompressed"
        raise BadRequest(msg, reason=msg)
    if request.mimetype in inputs.FORM_TYPES and (request.content_length or 0) > 0:
        msg = f"the body is {request.mimetype}; send JSON with Content-Type: application/json"
        raise BadRequest(msg, reason=msg)
    data = inputs.loads(request.get_data(cache=True) or b"{}", ["body"])
    if not isinstance(data, dict):
        raise ValidationFailed([{"loc": ["body"], "msg": "must be a JSON object"}])
    return data


def parse_body(model: type[M]) -> M:
    """Parse the JSON object body into `model`, or raise a 400/422 naming the field."""
    data = json_object()
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValidationFailed(pydantic_errors(exc)) from exc


def pydantic_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(err["loc"]), "msg": err["msg"]} for err in exc.errors()]


def query_int(name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter within [low, high], else 422 naming it."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    value = inputs.ascii_int(raw)
    if value is None or not low <= value <= high:
        msg = f"must be an integer from {low} to {high}"
        raise ValidationFailed([{"loc": ["query", name], "msg": msg}])
    return value


def page_args(namespace: str, collection: str) -> tuple[int, list[Any] | None]:
    """`limit` (1-100, default 50) and the decoded `cursor` of this request, if any."""
    limit = query_int("limit", 50, 1, 100)
    token = request.args.get("cursor")
    if not token:
        return limit, None
    return limit, decode_cursor(token, namespace, collection, _filters())


def page_json(
    namespace: str, collection: str, items: list[dict[str, Any]], key: list[Any] | None
) -> dict[str, Any]:
    """A list's body: its items and the sealed cursor of the next page (or null)."""
    cursor = encode_cursor(namespace, collection, key, _filters()) if key is not None else None
    return {"items": items, "next_cursor": cursor}


def query_flag(name: str) -> bool:
    """A yes/no query parameter: absent or empty is no; anything but these words is 422."""
    raw = (request.args.get(name) or "").lower()
    if raw not in FLAG_WORDS:
        msg = "must be true or false (or 1/0, yes/no)"
        raise ValidationFailed([{"loc": ["query", name], "msg": msg}])
    return FLAG_WORDS[raw]


def _filters() -> str:
    """This request's filters, which a list's cursor is bound to, each as the lists read it so
    spellings of one filter bind alike: a yes/no parameter is "true" or absent, the runs'
    comma-separated status list is a set (empty values are absent: `filters_of` drops them).
    A parameter read once never comes here twice (`refuse_repeated` answered 422), so two
    requests that bind alike list the same rows."""
    return filters_of(_as_read(name, value) for name, value in request.args.items(multi=True))


def _as_read(name: str, value: str) -> tuple[str, str]:
    if name in FLAG_PARAMS:
        return name, "true" if FLAG_WORDS.get(value.lower()) else ""
    if name == "status":
        return name, ",".join(sorted({part for part in value.split(",") if part}))
    return name, value


def command(reason: str | None = None) -> CommandContext:
    """Who asks for this change (the token's user), through which door (`X-Almanac-Source`:
    `cli` or `sdk` when declared, else `api`), the request id, and why: the `command_context`
    of the audit events it writes."""
    source = declared_source(request.headers.get("X-Almanac-Source"))
    request_id = declared_request_id(request.headers.get("X-Request-Id")) or str(uuid.uuid4())
    return CommandContext(current_user().username, source, request_id, reason)
