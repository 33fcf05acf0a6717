"""Sealed cursors refuse forgeries and cursors of another namespace or collection, and cannot be
read."""

from __future__ import annotations

import base64

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


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def test_a_cursor_cannot_be_read(app):
    # Cursors were signed, not sealed: base64 JSON anyone could read. A position holds row ids
    # every namespace shares, so a tenant could count what happened in the others.
    with app.test_request_context():
        token = encode_cursor("default", "runs", ["2026-01-01T00:00:00Z", 12558], "f1")
        raw = _raw(token)
        for secret in (b"12558", b"default", b"2026", b'"k"', b"f1"):
            assert secret not in raw
        # One position, one cursor (a hint printed twice names the same); another, another.
        assert encode_cursor("default", "runs", ["2026-01-01T00:00:00Z", 12558], "f1") == token
        assert encode_cursor("default", "runs", ["2026-01-01T00:00:00Z", 12559], "f1") != token
        # Any change to it is refused.
        for index in range(0, len(raw), 7):
            changed = bytearray(raw)
            changed[index] ^= 1
            forged = base64.urlsafe_b64encode(bytes(changed)).decode().rstrip("=")
            with pytest.raises(InvalidCursor):
                decode_cursor(forged, "default", "runs", "f1")
        for junk in ("", "é", "a" * 3, "!!!!"):
            with pytest.raises(InvalidCursor):
                decode_cursor(junk, "default", "runs")


def test_the_apis_list_cursors_hold_no_readable_position(client, admin_api):
    flow = {"name": "flow", "steps": [{"id": "a", "type": "action", "action": "noop"}]}
    assert admin_api.post("/workflows", json=flow).status_code == 201
    assert admin_api.post("/activations", json={"workflow": "flow"}).status_code == 201
    for index in range(3):
        started = admin_api.post("/runs", json={"workflow": "flow", "run_id": f"r{index}"})
        assert started.status_code == 201, started.get_json()
    page = admin_api.get("/runs?limit=1").get_json()
    raw = _raw(page["next_cursor"])
    assert b'"k"' not in raw and b'"ns"' not in raw and b"default" not in raw
    # It still pages: the next page starts where the first one ended.
    after = admin_api.get(f"/runs?limit=1&cursor={page['next_cursor']}").get_json()
    assert after["items"][0]["run_id"] != page["items"][0]["run_id"]
