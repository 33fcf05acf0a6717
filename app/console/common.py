"""What every console view shares: the acting user, its command context, page cursors."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flask import request
from flask_login import current_user

from app.db import User
from app.errors import ValidationFailed
from app.paging import decode_cursor, encode_cursor, filters_of
from app.schedules.audit import CommandContext


def actor() -> User:
    return current_user.user  # type: ignore[no-any-return]


def command(reason: str | None = None) -> CommandContext:
    """The command context (docs/schedules.md) of a console action."""
    return CommandContext(actor().username, "console", str(uuid.uuid4()), reason or None)


def page_key(
    namespace: str, collection: str, filters: Mapping[str, Any] | None = None
) -> list[Any] | None:
    """The keyset position of `?cursor=` for a console list (sealed, bound to the namespace and
    to the list's `filters`: one made under other filters is refused, 400, rather than skipping
    or repeating rows)."""
    token = request.args.get("cursor")
    if not token:
        return None
    return decode_cursor(token, namespace, f"console-{collection}", _bound(filters))


def next_cursor(
    namespace: str,
    collection: str,
    key: list[Any] | None,
    filters: Mapping[str, Any] | None = None,
) -> str | None:
    """The sealed cursor of the page after `key`, bound to the `filters` it was listed with."""
    if not key:
        return None
    return encode_cursor(namespace, f"console-{collection}", key, _bound(filters))


def _bound(filters: Mapping[str, Any] | None) -> str:
    """A digest of a list's filters (each a value or a list of values, in any order)."""
    pairs: list[tuple[str, str]] = []
    for name, value in (filters or {}).items():
        values: Iterable[Any] = value if isinstance(value, list | tuple | set) else [value]
        pairs.extend((name, str(one)) for one in values if one not in (None, ""))
    return filters_of(pairs)


def chosen(
    name: str, allowed: Sequence[str], default: str | None = None, *, once: bool = False
) -> list[str]:
    """The values of query argument `name` (`default` when absent), each one of `allowed`;
    with `once`, a list showing one of them, so more than one value is refused.

    A value outside them is refused (422 naming `query.<name>`, as the API answers) rather than
    dropped: a list quietly showing everything reads as "nothing is filtered out"."""
    if once:
        one_arg(name)
    values = [value for value in request.args.getlist(name) if value] or (
        [default] if default else []
    )
    for value in values:
        if value not in allowed:
            msg = f"must be one of {', '.join(allowed)}"
            raise ValidationFailed([{"loc": ["query", name], "msg": msg}])
    return values


def one_arg(name: str) -> str | None:
    """Query argument `name`, which a list reads once: given more than once it is refused
    (422 naming `query.<name>`, as the API answers), never read as its first value."""
    values = request.args.getlist(name)
    if len(values) > 1:
        msg = f"{name} is given {len(values)} times; choose one"
        raise ValidationFailed([{"loc": ["query", name], "msg": msg}])
    return values[0] if values else None
