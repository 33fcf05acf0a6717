"""Signed cursors refuse forgeries and cursors of another namespace or collection."""

from __future__ import annotations

import pytest

from app.errors import InvalidCursor
from app.paging import decode_cursor, encode_cursor


def test_cursor_round_trip_and_binding(app):
    with app.test_request_context():
        token = encode_cursor("default", "runs", ["2026-01-01T00:00:00Z", 42])
        assert decode_cursor(token, "default", "runs") == ["2026-01-01T00:00:00Z", 42]
        for namespace, collection in [("other", "runs"), ("default", "schedules")]:
            with pytest.raises(InvalidCursor):
                decode_cursor(token, namespace, collection)
        with pytest.raises(InvalidCursor):
            decode_cursor(token[:-2] + "xx", "default", "runs")
