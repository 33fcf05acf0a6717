"""The SDK and the CLI on backfills that use up `max_runs`, ids that hold '/', typed results,
conflicts without a revision and URLs with a password, against a live server on both databases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from almanac import AlmanacError, AsyncClient, Client, Conflict, InvalidId, NotUnicode
from almanac.cli import cli
from tests.client.conftest import NOOP, JsonHandler, run_cli, schedule_body, served, serving

# 1500 minutely occurrences: refused whole as too large, then sent as two halves of 750.
RANGE = ("2026-10-01T00:00:00Z", "2026-10-02T01:00:00Z")
# 1002 minutely occurrences: two halves of 501.
EVEN_RANGE = ("2026-10-01T00:00:00Z", "2026-10-01T16:42:00Z")


def minutely(schedule_id: str, **extra: Any) -> dict[str, Any]:
    return schedule_body(schedule_id, "* * * * *", overlap_policy="allow_all") | extra


def exhausted_skip(at: str) -> dict[str, Any]:
    return {
        "occurrence_time": at,
        "outcome": "skipped",
        "reason": "max_runs_exhausted",
        "run_id": None,
    }


def runs_of(sdk: Client, schedule_id: str) -> list[str]:
    return [run.run_id for run in sdk.list_runs(schedule_id=schedule_id)]


# --- a split backfill that uses up max_runs ---------------------------------------------------


def test_a_split_backfill_that_uses_up_max_runs_sums_its_parts_and_skips_the_rest(sdk):
    sdk.save_schedule(minutely("five", max_runs=5))
    result = sdk.backfill_schedule("five", *RANGE)
    assert (result.started, result.skipped, len(result.results)) == (5, 1495, 1500)
    # The whole range (too large), the first half (5 runs), the second (schedule deleted).
    assert result.requests == 3
    body = result.raw
    times = [item["occurrence_time"] for item in body["results"]]
    assert times == sorted(set(times)) and (times[0], times[-1]) == (
        "2026-10-01T00:00:00Z",
        "2026-10-02T00:59:00Z",
    )
    assert [item["outcome"] for item in body["results"][:5]] == ["backfilled"] * 5
    # The server's own skips (first half) and the client's (second half) read the same.
    assert body["results"][5] == exhausted_skip("2026-10-01T00:05:00Z")
    assert body["results"][750] == exhausted_skip("2026-10-01T12:30:00Z")
    assert body["results"][-1] == exhausted_skip("2026-10-02T00:59:00Z")
    assert result.results[-1].occurrence_time == datetime(2026, 10, 2, 0, 59, tzinfo=UTC)
    assert len(runs_of(sdk, "five")) == 5
    assert sdk.get_schedule("five").status == "deleted"


def test_the_last_run_at_the_end_of_a_part_still_skips_the_parts_after_it(sdk):
    # The first half starts exactly max_runs runs: its answer skips nothing, and the schedule
    # is deleted as its last run starts.
    sdk.save_schedule(minutely("even", max_runs=501))
    result = sdk.backfill_schedule("even", *EVEN_RANGE)
    assert (result.started, result.skipped, result.requests) == (501, 501, 3)
    assert result.raw["results"][501] == exhausted_skip("2026-10-01T08:21:00Z")
    assert {item["reason"] for item in result.raw["results"][501:]} == {"max_runs_exhausted"}


def test_the_async_client_sums_a_backfill_that_uses_up_max_runs(sdk, live, namespace):
    sdk.save_schedule(minutely("async-five", max_runs=5))

    async def backfill() -> Any:
        async with AsyncClient(live.url, live.token, namespace) as client:
            return await client.backfill_schedule("async-five", *RANGE)

    result = asyncio.run(backfill())
    assert (result.started, result.skipped, result.requests, len(result.results)) == (
        5,
        1495,
        3,
        1500,
    )
    assert result.raw["results"][-1] == exhausted_skip("2026-10-02T00:59:00Z")
    assert len(runs_of(sdk, "async-five")) == 5


def test_the_cli_prints_the_summed_backfill_and_exits_0(almanac, sdk):
    sdk.save_schedule(minutely("cli-five", max_runs=5))
    table = almanac("schedules", "backfill", "cli-five", "--from", RANGE[0], "--to", RANGE[1])
    assert table.exit_code == 0, table.stderr
    assert dict(line.split() for line in table.stdout.splitlines()) == {
        "started": "5",
        "skipped": "1495",
        "already_started": "0",
        "occurrences": "1500",
        "requests": "3",
    }
    window = ("--from", RANGE[0], "--to", RANGE[1])
    # Once deleted, the first request is refused, as one request over the range would be.
    again = almanac("schedules", "backfill", "cli-five", *window)
    assert again.exit_code == 1 and again.stderr.startswith("error SCHEDULE_DELETED: ")
    sdk.save_schedule(minutely("cli-json", max_runs=5))
    merged = almanac("schedules", "backfill", "cli-json", *window, "-o", "json")
    assert merged.exit_code == 0, merged.stderr
    body = json.loads(merged.stdout)
    assert (body["started"], body["skipped"], body["requests"]) == (5, 1495, 3)
    assert body["results"][-1] == exhausted_skip("2026-10-02T00:59:00Z")


def test_a_schedule_deleted_by_someone_else_mid_backfill_still_fails(almanac, sdk, monkeypatch):
    original = Client.backfill_once

    def then_delete(self: Client, schedule_id: str, *args: Any, **kwargs: Any) -> Any:
        result = original(self, schedule_id, *args, **kwargs)
        revision = self.get_schedule(schedule_id).revision
        self.delete_schedule(schedule_id, revision, "deleted by hand")
        return result

    monkeypatch.setattr(Client, "backfill_once", then_delete)
    sdk.save_schedule(minutely("by-hand", max_runs=1000))
    with pytest.raises(Conflict) as caught:
        sdk.backfill_schedule("by-hand", *RANGE)
    assert caught.value.code == "SCHEDULE_DELETED"
    assert len(runs_of(sdk, "by-hand")) == 750
    sdk.save_schedule(minutely("by-hand-cli"))
    result = almanac("schedules", "backfill", "by-hand-cli", "--from", RANGE[0], "--to", RANGE[1])
    assert result.exit_code == 1 and result.stderr.startswith("error SCHEDULE_DELETED: ")


# --- ids that hold '/' ------------------------------------------------------------------------


class Recorder(JsonHandler):
    """Records every request's path and answers an empty object."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        Recorder.seen.append(self.path)
        self.send_json(200, {})

    def do_POST(self) -> None:  # noqa: N802
        self.do_GET()


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    with serving(Recorder) as url:
        yield url


def test_an_id_with_a_slash_is_refused_naming_it_before_any_request(recorder):
    with Client(recorder, "t") as client, Client(recorder, "t", "default/schedules") as other:
        calls = [
            (lambda: client.get_schedule("hist/history"), "schedule id 'hist/history'"),
            (lambda: client.pause_schedule("a/b", 1), "schedule id 'a/b'"),
            (lambda: client.get_run("r/1"), "run id 'r/1'"),
            (lambda: client.signal_run("appr-1", "sig/../x"), "signal name 'sig/../x'"),
            (lambda: client.get_workflow("w/v"), "workflow name 'w/v'"),
            (lambda: client.complete_task("1/2"), "task id '1/2'"),
            (lambda: list(other.list_schedules()), "namespace 'default/schedules'"),
            (lambda: client.get_schedule(""), "schedule id is empty"),
        ]
        for call, named in calls:
            with pytest.raises(InvalidId) as caught:
                call()
            assert named in str(caught.value)
            assert isinstance(caught.value, ValueError)
        # A lone surrogate is the same kind of error, naming what it is too.
        with pytest.raises(NotUnicode, match="the run id 'r\\\\udfff' is not valid Unicode"):
            client.get_run("r\udfff")
    assert Recorder.seen == []


def test_the_cli_refuses_an_id_with_a_slash_as_a_usage_error(almanac, sdk):
    sdk.save_schedule(schedule_body("hist"))
    sdk.start_run("noop-flow", run_id="appr-1")
    for args, named in (
        (("schedules", "read", "hist/history"), "schedule id 'hist/history'"),
        (("schedules", "list", "-n", "default/schedules"), "namespace 'default/schedules'"),
        (("runs", "signal", "appr-1", "sig/../x"), "signal name 'sig/../x'"),
        (("schedules", "read", "s\udce9"), "not valid Unicode"),
    ):
        result = almanac(*args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert named in result.stderr and "Traceback" not in result.stderr
        assert result.stdout == ""
    # What the refused commands would have reached stays as it was.
    assert [e.event_type for e in sdk.iter_schedule_history("hist")] == ["ScheduleCreated"]


# --- typed results ----------------------------------------------------------------------------


def test_occurrences_runs_upcoming_and_versions_carry_every_field_typed(sdk):
    sdk.save_schedule(minutely("typed"))
    sdk.backfill_schedule("typed", "2026-10-01T00:00:00Z", "2026-10-01T00:02:00Z")
    occurrences = list(sdk.list_occurrences("typed"))
    assert [(o.origin, o.count, o.kind) for o in occurrences] == [("backfill", 1, "started")] * 2
    started = sdk.start_run("noop-flow", run_id="labelled", labels={"team": "billing"})
    assert started.labels == {"team": "billing"}
    assert sdk.get_run("labelled").labels == {"team": "billing"}
    listed = {run.run_id: run.labels for run in sdk.list_runs()}
    assert listed["labelled"] == {"team": "billing"}
    upcoming = sdk.get_schedule("typed", upcoming=2).upcoming
    assert upcoming is not None and len(upcoming) == 2
    assert {type(item).__name__ for item in upcoming} == {"PreviewOccurrence"}
    assert upcoming[0].at is not None and upcoming[0].at.tzinfo is not None
    assert upcoming[0].utc_offset == "+00:00" and upcoming[0].note is None
    # Still read as the API's dict was.
    assert upcoming[0]["at"] == upcoming[0].raw["at"] and upcoming[0]["at"].endswith("Z")
    versions = sdk.get_workflow("noop-flow").versions
    assert versions is not None and type(versions[0]).__name__ == "VersionSummary"
    assert versions[0].version == 1 and versions[0].created_at.tzinfo is not None


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def own_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A server of this module's own, so a test can move its manual clock: the shared server's
    clock stays the real one for every other test."""
    with served(request, tmp_path_factory, "own") as server:
        yield server


def test_a_tick_answers_typed_rows_and_failures(own_server):
    with Client(own_server.url, own_server.token, "default") as client:
        client.deploy_workflow(NOOP)
        client.create_activation("noop-flow")
        client.set_clock("2026-12-01T00:00:00Z")
        client.save_schedule(minutely("ticked"))
        client.set_clock("2026-12-01T00:01:00Z")
        result = client.tick(work=True)
    assert result.failures == []
    assert result.now == datetime(2026, 12, 1, 0, 1, tzinfo=UTC)
    assert [(type(row).__name__, row.schedule_id, row.outcome) for row in result.rows] == [
        ("TickRow", "ticked", "triggered")
    ]
    row = result.rows[0]
    assert row.namespace == "default" and row.run_id is not None
    assert row.occurrence_time == datetime(2026, 12, 1, 0, 1, tzinfo=UTC)
    assert row.next_fire_at == datetime(2026, 12, 1, 0, 2, tzinfo=UTC)
    assert row["occurrence_time"] == "2026-12-01T00:01:00Z"  # still read as the API's dict
    # Moving the clock with `tick` answers the same typed result.
    with Client(own_server.url, own_server.token, "default") as client:
        moved = client.set_clock("2026-12-01T00:02:00Z", tick=True)
        plain = client.set_clock("2026-12-01T00:02:30Z")
    assert type(moved).__name__ == "TickResult" and moved.failures == []
    assert [(r.schedule_id, r.outcome) for r in moved.rows] == [("ticked", "triggered")]
    assert plain == {"now": "2026-12-01T00:02:30Z"}


class FailedTick(JsonHandler):
    """A tick whose work phase failed: the server's shape for it."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        self.send_json(
            200,
            {
                "now": "2026-12-01T00:00:00Z",
                "rows": [],
                "deadlines": 0,
                "steps": 3,
                "failures": [{"phase": "work", "where": "", "cause": "OperationalError: gone"}],
            },
        )


def test_a_ticks_failures_are_typed():
    with serving(FailedTick) as url, Client(url, "t") as client:
        result = client.tick(work=True)
    [failure] = result.failures
    assert type(failure).__name__ == "TickFailure"
    assert (failure.phase, failure.where, failure.cause) == ("work", "", "OperationalError: gone")
    assert result.now == datetime(2026, 12, 1, tzinfo=UTC)


# --- a conflict with no current revision ------------------------------------------------------


def test_a_revision_conflict_on_a_missing_schedule_names_no_revision(almanac, sdk):
    result = almanac("schedules", "pause", "nope", "--revision", "1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error SCHEDULE_REVISION: schedule 'nope' does not exist")
    assert "None" not in result.stderr and "current revision:" not in result.stderr
    sdk.save_schedule(schedule_body("there"))
    stale = almanac("schedules", "pause", "there", "--revision", "7")
    assert stale.exit_code == 1 and stale.stderr.rstrip().endswith("(current revision: 1)")


# --- a URL with a user and password -----------------------------------------------------------


def test_a_url_with_a_password_is_refused_without_echoing_it(recorder, tmp_path: Path):
    url = recorder.replace("http://", "http://user:s3cret@")
    for make in (Client, AsyncClient):
        with pytest.raises(ValueError) as caught:
            make(url, "t")
        assert "s3cret" not in str(caught.value) and "user name or password" in str(caught.value)
    for args in (("schedules", "list"), ("auth", "setup", "--url", url, "--token", "t")):
        result = run_cli(url, tmp_path, *args)
        assert result.exit_code == 2, (args, result.output)
        assert "s3cret" not in result.output and "user name or password" in result.stderr
    assert not (tmp_path / "config").exists()  # no profile written
    assert Recorder.seen == []  # nothing sent, so no Basic credentials either


def test_a_url_ending_with_the_api_prefix_is_taken_as_the_api_root(recorder, tmp_path: Path):
    # `ALMANAC_URL=http://host:port/api/v1` sent /api/v1/api/v1/... and met a bare 404.
    for url in (f"{recorder}/api/v1", f"{recorder}/api/v1/"):
        Recorder.seen = []
        with Client(url, "t") as client:
            assert client.request("GET", "/me") == {}
        run_cli(url, tmp_path, "auth", "status")
        assert Recorder.seen == ["/api/v1/me", "/api/v1/me"], url


def test_a_command_without_a_token_is_a_usage_error_before_any_request(recorder, tmp_path: Path):
    # With ALMANAC_URL set and no token, the request went out anyway and came back 401.
    env = {
        "ALMANAC_URL": recorder,
        "ALMANAC_TOKEN": None,
        "ALMANAC_PROFILE": None,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    for args in (("schedules", "list"), ("auth", "status"), ("runs", "list")):
        result = CliRunner().invoke(cli, list(args), env=env)
        assert result.exit_code == 2, (args, result.output)
        assert "no token: pass --token, set ALMANAC_TOKEN" in result.stderr
    assert Recorder.seen == []


class Refusing(JsonHandler):
    """Answers as a server whose database login lacks a grant."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        Refusing.seen.append(self.path)
        error = {"code": "DATABASE_REFUSED", "message": "the database refused it", "details": {}}
        self.send_json(503, {"error": error})


def test_a_database_refusal_is_raised_at_once_not_retried():
    # A refusal answers the same until an operator acts: reads were retried as for a busy
    # database, delaying the error by the whole backoff.
    Refusing.seen = []
    with serving(Refusing) as url, Client(url, "t", retries=1) as client:
        with pytest.raises(AlmanacError) as caught:
            client.me()
    assert caught.value.status == 503 and caught.value.code == "DATABASE_REFUSED"
    assert Refusing.seen == ["/api/v1/me"]


def test_an_option_given_twice_is_a_usage_error_before_any_request(recorder, tmp_path: Path):
    # Click kept the last value: `--status completed --status pending` listed pending runs only.
    env = {
        "ALMANAC_URL": recorder,
        "ALMANAC_TOKEN": "alm_test_token_value",
        "ALMANAC_PROFILE": None,
    }
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    cases = [
        (["runs", "list", "--status", "completed", "--status", "pending"], "--status is given 2"),
        (["schedules", "list", "--status=paused", "--status", "active"], "--status is given 2"),
        (["schedules", "list", "--limit", "2", "--limit", "3"], "--limit is given 2"),
    ]
    for args, said in cases:
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 2, (args, result.output)
        assert said in result.stderr, result.stderr
    assert "comma-separated" in CliRunner().invoke(cli, cases[0][0], env=env).stderr
    assert Recorder.seen == []
    # Options that repeat by design still do, and one value still goes through.
    ok = CliRunner().invoke(cli, ["schedules", "list", "--label", "a:1", "--label", "b:2"], env=env)
    assert ok.exit_code != 2, ok.output
    assert Recorder.seen, "the request was sent"
