"""What a black-box tester found: `request()` outside the client's namespace, tables wider than the
terminal, a hint on a full stderr exiting 1, `apply` blind to sub-microsecond bounds, and
`mailto:` URLs refused as holding a password."""

from __future__ import annotations

import asyncio

import pytest

from almanac import AsyncClient, Client, InvalidId, NotFound
from tests.client.conftest import NOOP

# --- request() in the client's namespace ------------------------------------------------------


def test_request_on_a_short_route_acts_in_the_clients_namespace(sdk, live, namespace):
    body = {"workflow": "noop-flow", "run_id": "by-request"}
    started = sdk.request("POST", "/runs", json=body)
    assert started["run_id"] == "by-request"
    assert sdk.get_run("by-request").run_id == "by-request"
    with Client(live.url, live.token) as default, pytest.raises(NotFound):
        default.get_run("by-request")
    listed = sdk.request("GET", "/runs", params={"limit": 100})
    assert [run["run_id"] for run in listed["items"]] == ["by-request"]


def test_the_async_request_acts_in_the_clients_namespace_too(live, namespace):
    async def start() -> dict:
        async with AsyncClient(live.url, live.token, namespace) as client:
            return await client.request(
                "POST", "/runs", json={"workflow": "noop-flow", "run_id": "by-async-request"}
            )

    assert asyncio.run(start())["run_id"] == "by-async-request"
    with Client(live.url, live.token, namespace) as client:
        assert client.get_run("by-async-request").run_id == "by-async-request"


def test_a_namespace_the_caller_names_wins_over_the_clients(sdk, live, namespace):
    other = f"{namespace}-o"
    sdk.create_namespace(other)
    sdk.request("POST", "/workflows", json=NOOP, headers={"x-namespace": other})
    path = f"/namespaces/{other}/activations"
    sdk.request("POST", path, json={"workflow": "noop-flow"})
    with Client(live.url, live.token, other) as there:
        assert [w.name for w in there.list_workflows()] == ["noop-flow"]
        assert len(list(there.list_activations())) == 1
    # Only the one deployed by the `namespace` fixture: nothing above landed here.
    assert len(list(sdk.list_activations())) == 1


def test_request_refuses_a_namespace_no_header_can_name_before_sending(live):
    # An empty X-Namespace reads as `default` on the server: it must not be sent.
    with Client(live.url, live.token, "") as client, pytest.raises(InvalidId):
        client.request("GET", "/runs")
