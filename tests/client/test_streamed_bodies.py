"""A body streamed without Content-Length (chunked) meets the same 1 MiB limit, on a real server."""

from __future__ import annotations

from collections.abc import Iterator

import requests

from almanac import Client

MIB = 1024 * 1024


def chunked(*parts: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """`parts` as a generator: requests then sends them chunked, without Content-Length."""
    for part in parts:
        for start in range(0, len(part), size):
            yield part[start : start + size]


def test_a_chunked_body_past_the_limit_is_413_and_nothing_is_written(live, namespace):
    url = f"{live.url}/api/v1/namespaces/{namespace}/runs"
    headers = {"Authorization": f"Bearer {live.token}", "Content-Type": "application/json"}
    start = b'{"workflow": "noop-flow", "run_id": "streamed-big"}'
    # Valid JSON in its first MiB, invalid after it: cut at the limit, it would start a run.
    body = chunked(start, b" " * (3 * MIB), b"garbage-after-the-limit")
    response = requests.post(url, data=body, headers=headers, timeout=60)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    small = requests.post(
        url, data=chunked(b'{"workflow": "noop-flow", "run_id": "streamed-small"}'), headers=headers
    )
    assert small.status_code == 201, small.text
    with Client(live.url, live.token, namespace) as client:
        assert [run.run_id for run in client.list_runs()] == ["streamed-small"]
