"""The README's "first ten minutes" block, run as written against a live server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.console.conftest import ROOT, LiveServer, serve

pytestmark = pytest.mark.browser
MARKER = "<!-- first-ten-minutes: executed by tests/console/test_readme.py -->"


def first_ten_minutes() -> str:
    readme = (ROOT / "README.md").read_text()
    assert MARKER in readme
    block = re.search(r"```sh\n(.*?)```", readme[readme.index(MARKER) :], re.DOTALL)
    assert block is not None
    return block.group(1)


@pytest.fixture
def fresh_server(tmp_path) -> Iterator[LiveServer]:
    """A server of its own: a newcomer's first ten minutes start from an empty database."""
    with serve(tmp_path) as server:
        yield server


def _run_as_a_script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The block as the README says to run it: a script under `bash -euo pipefail`."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", first_ten_minutes()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_first_ten_minutes_work_as_written(fresh_server):
    live_server = fresh_server
    env = live_server.env | {"ALMANAC_URL": live_server.url, "PATH": os.environ["PATH"]}
    done = _run_as_a_script(env)
    assert done.returncode == 0, done.stderr + done.stdout
    outputs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    workflow, activation, schedule, run, history = outputs
    assert (workflow["name"], workflow["version"]) == ("nightly-report", 1)
    assert activation["status"] == "ready"
    assert schedule["spec"]["timezone"] == "America/New_York"
    assert schedule["action"]["workflow"] == "nightly-report"
    assert run["run_id"].startswith("schedule:nightly-report:manual:")
    assert run["workflow"] == "nightly-report" and run["input"] == {"mode": "nightly"}
    events = [event["event_type"] for event in history["events"]]
    assert events == ["ScheduleCreated", "ScheduleTriggered"]
    assert history["events"][1]["workflow_instance_id"] == run["run_id"]
    assert history["events"][1]["payload"]["command_context"]["reason"] == "first try"
    # Run again on the same database, as the README says: the schedule exists, so the block
    # stops at step 3 with the API's JSON error, and nothing after it runs.
    again = _run_as_a_script(env)
    assert again.returncode != 0
    bodies = [json.loads(line) for line in again.stdout.splitlines() if line.startswith("{")]
    assert [b.get("version") for b in bodies[:1]] == [2]
    assert bodies[-1]["error"]["code"] == "SCHEDULE_REVISION" and len(bodies) == 3
