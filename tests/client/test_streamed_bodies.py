"""A body streamed without Content-Length (chunked) meets the same 1 MiB limit, on a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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


def test_after_a_413_the_next_change_goes_on_a_new_connection(live, namespace):
    """The server closes the connection after a 413 (its answer says keep-alive): the SDK sent
    the next change on it and reported NoAnswer, "it may have been done", for a run it never
    started."""
    from almanac import AlmanacError, AsyncClient

    big = {"schedule_id": "big", "cron": "0 1 * * *", "action": {"workflow": "noop-flow"}}
    big["notes"] = "x" * (2 * MIB)
    with Client(live.url, live.token, namespace) as client:
        for index in range(3):
            with pytest.raises(AlmanacError) as refused:
                client.save_schedule(big)
            assert refused.value.code == "PAYLOAD_TOO_LARGE"
            assert client.start_run("noop-flow", run_id=f"after-413-{index}").run_id

    async def walk() -> list[str]:
        started = []
        async with AsyncClient(live.url, live.token, namespace) as client:
            for index in range(3):
                with pytest.raises(AlmanacError, match="1048576|too large|limit"):
                    await client.save_schedule(big)
                run = await client.start_run("noop-flow", run_id=f"async-after-413-{index}")
                started.append(run.run_id)
        return started

    import asyncio

    assert len(asyncio.run(walk())) == 3
    with Client(live.url, live.token, namespace) as client:
        assert len([run for run in client.list_runs()]) == 6


def test_after_a_404_or_405_to_a_body_the_next_change_is_answered(live, namespace):
    """A 404 or 405 answered before the body was read left it unread, and the server closed
    the connection: the SDK's next change read as NoAnswer ("it may have been done")."""
    from almanac import AlmanacError

    body = {"notes": "q" * 100_000}
    with Client(live.url, live.token, namespace) as client:
        for index, path in enumerate(
            [f"/namespaces/{namespace}/schedules/nope", f"/namespaces/{namespace}/no-such-thing"]
            * 2
        ):
            with pytest.raises(AlmanacError) as refused:
                client.request("POST", path, json=body)
            assert refused.value.status in (404, 405)
            assert client.start_run("noop-flow", run_id=f"after-404-{index}").run_id
