"""Opaque keyset cursors, signed and bound to their namespace and collection (SPEC §7)."""

from __future__ import annotations

from typing import Any

from flask import current_app, request
from itsdangerous import BadSignature, URLSafeSerializer

from app.api.routing import query_int
from app.errors import InvalidCursor


def _serializer(collection: str) -> URLSafeSerializer:
    return URLSafeSerializer(current_app.config["SECRET_KEY"], salt=f"cursor:{collection}")


def encode_cursor(namespace: str, collection: str, key: list[Any]) -> str:
    """Sign the keyset position `key` (JSON-able values) of `collection` in `namespace`."""
    return _serializer(collection).dumps({"ns": namespace, "k": key})


def decode_cursor(token: str, namespace: str, collection: str) -> list[Any]:
    """The keyset position in `token`; 400 INVALID_CURSOR if forged or from elsewhere."""
    try:
        data = _serializer(collection).loads(token)
    except BadSignature as exc:
        raise InvalidCursor("the cursor is not valid for this list") from exc
    if (
        not isinstance(data, dict)
        or data.get("ns") != namespace
        or not isinstance(data.get("k"), list)
    ):
        raise InvalidCursor("the cursor belongs to another namespace or list")
    return data["k"]


def page_args(namespace: str, collection: str) -> tuple[int, list[Any] | None]:
    """`limit` (1-100, default 50) and the decoded `cursor` of this request, if any."""
    limit = query_int("limit", 50, 1, 100)
    token = request.args.get("cursor")
    return limit, decode_cursor(token, namespace, collection) if token else None
