"""Keyset paging for every list, below both faces: signed cursors, page queries, page splits.

A list is read in a stable order and one row more than the page is fetched; that extra row only
says whether another page follows. The position of the last row shown travels to the client as an
opaque cursor, encrypted and authenticated (AES-GCM, its key derived from the secret key) and
bound to its namespace, its collection and the filters of the request that returned it, so it
cannot be forged or replayed against another list (or the same list filtered otherwise, where its
position would skip or repeat rows), nor read: a position holds row ids that every namespace
shares, and from them a tenant could count what happens in namespaces it cannot see.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from flask import current_app
from sqlalchemy import ColumnElement, Select, and_, or_

from app.errors import InvalidCursor

R = TypeVar("R")
S = TypeVar("S", bound=Select[Any])


class Created(Protocol):
    """A row that lists newest first: its creation time, then its primary key."""

    created_at: datetime
    id: int


def _key() -> bytes:
    """The cursors' key: one of its own, derived from the secret key (which signs sessions
    too), never the secret key itself."""
    secret = str(current_app.config["SECRET_KEY"]).encode()
    return hashlib.sha256(b"almanac cursors|" + secret).digest()


def _seal(collection: str, data: dict[str, Any]) -> str:
    key, plain, bound = _key(), json.dumps(data).encode(), f"cursor:{collection}".encode()
    # The nonce is derived from what is sealed (as in AES-GCM-SIV): the same position always
    # gives the same cursor (a hint printed twice names one cursor), and a nonce is only ever
    # reused for the very same text, which reveals nothing but that equality.
    nonce = hmac.new(key, bound + b"|" + plain, hashlib.sha256).digest()[:12]
    sealed = AESGCM(key).encrypt(nonce, plain, bound)
    return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


def _open(collection: str, token: str) -> Any:
    """The cursor's content; InvalidCursor when it was not sealed for `collection` here."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        plain = AESGCM(_key()).decrypt(raw[:12], raw[12:], f"cursor:{collection}".encode())
        return json.loads(plain)
    except (ValueError, binascii.Error, InvalidTag) as exc:
        raise InvalidCursor("the cursor is not valid for this list") from exc


# Query parameters that say where a page starts or how long it is, not which rows are listed.
NOT_FILTERS = frozenset({"cursor", "limit", "after_sequence"})


def filters_of(pairs: Iterable[tuple[str, str]]) -> str:
    """A short digest of a request's filters (its query pairs in any order, but the position,
    the page size and empty values); "" when it has none."""
    kept = sorted((name, value) for name, value in pairs if name not in NOT_FILTERS and value)
    if not kept:
        return ""
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:16]


def encode_cursor(namespace: str, collection: str, key: list[Any], filters: str = "") -> str:
    """Seal the keyset position `key` (JSON-able values) of `collection` in `namespace`, listed
    with `filters` (`filters_of` the request)."""
    data: dict[str, Any] = {"ns": namespace, "k": key}
    if filters:
        data["f"] = filters
    return _seal(collection, data)


def decode_cursor(token: str, namespace: str, collection: str, filters: str = "") -> list[Any]:
    """The keyset position in `token`; 400 INVALID_CURSOR if forged, from elsewhere, or from the
    same list with other filters."""
    data = _open(collection, token)
    if (
        not isinstance(data, dict)
        or data.get("ns") != namespace
        or not isinstance(data.get("k"), list)
    ):
        raise InvalidCursor("the cursor belongs to another namespace or list")
    if data.get("f", "") != filters:
        raise InvalidCursor(
            "the cursor belongs to this list with other filters: send the filters of the "
            "request that returned it (only limit may change), or start without a cursor"
        )
    return data["k"]


def after_key(
    columns: Sequence[Any], values: Sequence[Any], *, descending: bool
) -> ColumnElement[bool]:
    """`(columns) > (values)` (or `<` when descending), spelled out so each side keeps its type."""
    clauses = []
    for index, column in enumerate(columns):
        equal = [columns[i] == values[i] for i in range(index)]
        beyond = column < values[index] if descending else column > values[index]
        clauses.append(and_(*equal, beyond))
    return or_(*clauses)


def keyset(
    query: S,
    columns: Sequence[Any],
    after: Sequence[Any] | None,
    limit: int,
    *,
    descending: bool,
) -> S:
    """`query` ordered by `columns`, from just past `after`, one row more than `limit`."""
    if after is not None:
        query = query.where(after_key(columns, after, descending=descending))
    order = [column.desc() for column in columns] if descending else list(columns)
    return query.order_by(*order).limit(limit + 1)


def newest_first(query: S, created: Any, ident: Any, after: list[Any] | None, limit: int) -> S:
    """`query` by creation time then id, newest first, from the position `created_key` gave."""
    position = [datetime.fromisoformat(after[0]), after[1]] if after else None
    return keyset(query, [created, ident], position, limit, descending=True)


def created_key(row: Created) -> list[Any]:
    """The cursor position of a row listed by `newest_first`."""
    return [row.created_at.isoformat(), row.id]


def split_page(
    rows: list[R], limit: int, key: Callable[[R], list[Any]]
) -> tuple[list[R], list[Any] | None]:
    """The first `limit` rows and the key of the last one when more follow."""
    if len(rows) <= limit or limit < 1:
        return rows[:limit], None
    rows = rows[:limit]
    return rows, key(rows[-1])
