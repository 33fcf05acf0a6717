"""What a black-box tester found: `request()` outside the client's namespace, tables wider than the
terminal, a hint on a full stderr exiting 1, `apply` blind to sub-microsecond bounds, and
`mailto:` URLs refused as holding a password."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from almanac import AsyncClient, Client, ConnectionFailed, InvalidId, NotFound
from almanac.plan import normalize
from tests.client.conftest import NOOP, run_cli, schedule_body
from tests.live import BIN

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


# --- tables fit 80 columns --------------------------------------------------------------------


def rows_of(result) -> list[str]:
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


def test_list_tables_fit_80_columns_and_keep_statuses_whole(almanac, sdk):
    sdk.deploy_workflow(NOOP | {"name": "invoice-sync-with-a-rather-long-name"})
    ready = sdk.create_activation("invoice-sync-with-a-rather-long-name")
    retired = sdk.create_activation("invoice-sync-with-a-rather-long-name")
    sdk.retire_activation(retired.id)
    sdk.start_run("invoice-sync-with-a-rather-long-name", run_id=f"run-{uuid.uuid4()}")
    long_id = f"{uuid.uuid4()}-nightly"
    sdk.save_schedule(schedule_body(long_id, labels={"team": "billing"}))
    sdk.save_schedule(schedule_body("short"))
    sdk.backfill_schedule("short", "2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z")

    activations = rows_of(almanac("activations", "list"))
    assert all(len(row) <= 80 for row in activations), activations
    assert activations[0].split() == ["ID", "Workflow", "Version", "Status"]
    by_id = {row.split()[0]: row.split()[-1] for row in activations[1:]}
    # Ids whole (another command takes them); `ready` and `retired` both read whole.
    assert by_id[ready.id] == "ready" and by_id[retired.id] == "retired"

    for args in (
        ("runs", "list"),
        ("schedules", "list"),
        ("schedules", "history", "short"),
        ("schedules", "occurrences", "short"),
        ("workflows", "list"),
        ("tasks", "list"),
        ("incidents", "list"),
    ):
        rows = rows_of(almanac(*args))
        assert all(len(row) <= 80 for row in rows), (args, rows)
    runs = rows_of(almanac("runs", "list"))
    assert runs[0].split()[:3] == ["Run", "Workflow", "Status"]
    assert any(row.split()[2] == "pending" for row in runs[1:])
    assert long_id in [row.split()[0] for row in rows_of(almanac("schedules", "list"))]


def test_a_wide_terminal_still_shows_every_column(almanac, sdk):
    sdk.create_activation("noop-flow")
    header = rows_of(almanac("activations", "list", COLUMNS="200"))[0]
    assert header.split() == ["ID", "Workflow", "Version", "Status", "Created", "At"]


# --- a hint that cannot be written ------------------------------------------------------------


def test_a_hint_on_a_full_stderr_exits_4_and_keeps_the_table(live, namespace, sdk, tmp_path):
    sdk.save_schedule(schedule_body("one"))
    sdk.save_schedule(schedule_body("two"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_URL": live.url,
        "ALMANAC_TOKEN": live.token,
        "ALMANAC_NAMESPACE": namespace,
        "XDG_CONFIG_HOME": str(tmp_path),
    }
    listing = [str(BIN / "almanac"), "schedules", "list", "--limit", "1"]
    with open("/dev/full", "w") as full:
        done = subprocess.run(listing, env=env, stdout=subprocess.PIPE, stderr=full)
        # An API error still exits 1 when stderr cannot say so.
        missing = [str(BIN / "almanac"), "schedules", "read", "nope"]
        failed = subprocess.run(missing, env=env, stdout=subprocess.PIPE, stderr=full)
    assert done.returncode == 4
    assert done.stdout.decode().splitlines()[1].split()[0] in ("one", "two")
    assert failed.returncode == 1
    # Without the hint (one page only) the same command succeeds on the same full stderr.
    with open("/dev/full", "w") as full:
        whole = subprocess.run([*listing[:-2]], env=env, stdout=subprocess.PIPE, stderr=full)
    assert whole.returncode == 0


# --- apply reads bounds as the server does ----------------------------------------------------


def apply_plan(almanac, folder: Path, *flags: str) -> dict[str, object]:
    result = almanac("schedules", "apply", str(folder), "-o", "json", *flags)
    assert result.exit_code == 0, result.stderr
    return {step["schedule_id"]: step["action"] for step in json.loads(result.stdout)["plan"]}


def bounded(schedule_id: str, start_at: str, end_at: str) -> dict[str, object]:
    return {
        "schedule_id": schedule_id,
        "spec": {"intervals": [{"every": "PT6H"}], "start_at": start_at, "end_at": end_at},
        "action": {"workflow": "noop-flow"},
    }


def test_apply_sees_a_start_at_100_ns_later_as_a_change(almanac, sdk, tmp_path):
    sdk.save_schedule(bounded("later", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"))
    sdk.save_schedule(bounded("end", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"))
    folder = tmp_path / "bounds"
    folder.mkdir()
    files = {
        # Read as ...00.000001Z: the midnight occurrence is no longer taken in.
        "later": bounded("later", "2027-01-01T00:00:00.0000001Z", "2028-01-01T00:00:00Z"),
        # An inclusive end moves down to the microsecond: the same bound.
        "end": bounded("end", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00.0000009Z"),
    }
    for name, body in files.items():
        (folder / f"{name}.json").write_text(json.dumps(body))
    assert apply_plan(almanac, folder, "--dry-run") == {
        "end": "unchanged",
        "later": "update",
    }
    assert apply_plan(almanac, folder)["later"] == "update"
    assert sdk.get_schedule("later").raw["spec"]["start_at"] == "2027-01-01T00:00:00.000001Z"
    assert set(apply_plan(almanac, folder).values()) == {"unchanged"}


def test_an_end_at_naming_the_start_at_rounds_with_it():
    # The server reads both as ...00.000001Z, so the bounds stay one instant.
    at = "2027-01-01T00:00:00.0000001Z"
    spec = normalize({"spec": {"start_at": at, "end_at": at}})["spec"]
    assert spec["start_at"] == spec["end_at"] == datetime(2027, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    later = normalize({"spec": {"start_at": "2027-01-01T00:00:00Z", "end_at": at}})["spec"]
    assert later["end_at"] == datetime(2027, 1, 1, tzinfo=UTC)


# --- a URL of another scheme ------------------------------------------------------------------


@pytest.mark.parametrize("url", ["mailto:x@y", "ftp://user:s3cret@127.0.0.1:1"])
def test_a_url_of_another_scheme_is_a_connection_error_first(url, tmp_path):
    for make in (Client, AsyncClient):
        with pytest.raises(ConnectionFailed, match="not a valid URL") as caught:
            make(url, "t")
        assert "http:// or https://" in str(caught.value) and "s3cret" not in str(caught.value)
    result = run_cli(url, tmp_path, "schedules", "list")
    assert result.exit_code == 2
    assert result.stderr == (
        "error CONNECTION: cannot reach the URL given: not a valid URL "
        "(it must start with http:// or https://)\n"
    )
