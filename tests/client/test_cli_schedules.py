"""`almanac schedules ...` against a live server, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from almanac import Client, NotFound
from tests.client.conftest import JsonHandler, run_cli, schedule_body, serving

BIN = Path(sys.executable).parent


def save(almanac, tmp_path, body, *args):
    path = tmp_path / f"{body['schedule_id']}.json"
    path.write_text(json.dumps(body))
    return almanac("schedules", "save", "--request", str(path), *args)


def test_save_creates_then_replaces_at_a_revision(almanac, tmp_path):
    created = save(almanac, tmp_path, schedule_body("nightly"), "-o", "json")
    assert created.exit_code == 0, created.stderr
    body = json.loads(created.stdout)
    assert (body["schedule_id"], body["revision"], body["status"]) == ("nightly", 1, "active")
    replaced = save(
        almanac, tmp_path, schedule_body("nightly", "30 2 * * *"), "--revision", "1", "-o", "json"
    )
    assert replaced.exit_code == 0, replaced.stderr
    assert json.loads(replaced.stdout)["revision"] == 2
    assert json.loads(replaced.stdout)["spec"]["cron_expressions"] == ["30 2 * * *"]


def test_save_reads_stdin_and_a_bad_calendar_exits_1_naming_the_code(almanac):
    body = json.dumps(schedule_body("piped"))
    piped = almanac("schedules", "save", "--request", "-", "-o", "jsonl", input=body)
    assert piped.exit_code == 0 and json.loads(piped.stdout)["schedule_id"] == "piped"
    bad = almanac(
        "schedules", "save", "--request", "-", input=json.dumps(schedule_body("x", "61 * * * *"))
    )
    assert bad.exit_code == 1
    assert bad.stderr.startswith("error CALENDAR_INVALID: ")
    assert bad.stdout == ""


def test_read_shows_the_schedule_and_an_unknown_id_exits_1(almanac, sdk):
    sdk.save_schedule(schedule_body("hourly"))
    shown = almanac("schedules", "read", "hourly")
    assert shown.exit_code == 0
    lines = dict(line.split(None, 1) for line in shown.stdout.splitlines() if line[0] != " ")
    assert lines["schedule_id"] == "hourly" and lines["status"] == "active"
    missing = almanac("schedules", "read", "nope")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error NOT_FOUND: ")


def test_read_shows_the_upcoming_due_times_one_per_line(almanac, sdk):
    sdk.save_schedule(schedule_body("hourly"))
    body = json.loads(almanac("schedules", "read", "hourly", "-o", "json").stdout)
    due = [item["at"] for item in body["upcoming"]]
    assert len(due) == 5
    lines = almanac("schedules", "read", "hourly").stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("upcoming "))
    assert [line.split()[-1] for line in lines[first : first + 5]] == due
    assert all(line.startswith(" ") for line in lines[first + 1 : first + 5])
    sdk.schedule("hourly").pause()
    paused = almanac("schedules", "read", "hourly").stdout.splitlines()
    assert [line.split() for line in paused if line.startswith("upcoming")] == [["upcoming", "-"]]


def test_list_all_walks_past_the_100_item_page(almanac, sdk):
    for index in range(105):
        sdk.save_schedule(schedule_body(f"s-{index:03d}"))
    lines = almanac("schedules", "list", "--all", "--limit", "100", "-o", "jsonl")
    assert lines.exit_code == 0, lines.stderr
    ids = [json.loads(line)["schedule_id"] for line in lines.stdout.splitlines()]
    assert sorted(ids) == [f"s-{index:03d}" for index in range(105)]
    every = json.loads(almanac("schedules", "list", "--all", "-o", "json").stdout)
    assert list(every) == ["items"] and len(every["items"]) == 105
    page = almanac("schedules", "list", "--limit", "100", "-o", "json")
    body = json.loads(page.stdout)
    assert len(body["items"]) == 100 and body["next_cursor"]
    table = almanac("schedules", "list", "--limit", "3")
    assert len(table.stdout.splitlines()) == 4
    assert table.stderr.startswith("More items available (--cursor ")


def test_a_reader_that_stops_early_stops_the_command_quietly_with_sigpipes_status(almanac, sdk):
    """`almanac schedules list --all | head -n 1` exited 1 (an API error, by the table of exit
    codes) when head closed the pipe; now 141, what a shell reports for `cat` there. (The
    memos make the output larger than a pipe holds, so the command is still writing.)"""
    for index in range(120):
        sdk.save_schedule(schedule_body(f"p-{index:03d}", memo={"pad": "x" * 800}))
    env = {k: v for k, v in os.environ.items() if v is not None} | {
        k: v for k, v in almanac.env.items() if v is not None
    }
    args = [str(BIN / "almanac"), "schedules", "list", "--all", "--limit", "20", "-o", "jsonl"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, stderr
    assert first and stderr == ""


def test_list_with_a_forged_cursor_exits_1(almanac):
    result = almanac("schedules", "list", "--cursor", "forged")
    assert result.exit_code == 1
    assert result.stderr.startswith("error INVALID_CURSOR: ")


def test_history_all_jsonl_prints_every_event_in_order(almanac, sdk):
    sdk.save_schedule(schedule_body("busy", "* * * * *", overlap_policy="allow_all"))
    # One ScheduleTriggered event per backfilled run: 1 + 250 events in one request.
    backfill = sdk.backfill_schedule("busy", "2026-10-01T00:00:00Z", "2026-10-01T04:10:00Z")
    assert backfill.started == 250
    result = almanac("schedules", "history", "busy", "--all", "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["sequence"] for e in events] == list(range(1, 252))
    assert [e["event_type"] for e in events[:2]] == ["ScheduleCreated", "ScheduleTriggered"]
    assert events[-1]["workflow_instance_id"] == "schedule:busy:backfill:20261001T040900Z"
    assert result.stderr == ""


def test_history_table_has_the_columns_and_the_more_events_hint(almanac, sdk):
    sdk.save_schedule(schedule_body("paged"))
    handle = sdk.schedule("paged")
    handle.pause("maintenance")
    handle.resume()
    result = almanac("schedules", "history", "paged", "--limit", "2")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split("  ")[:1] == ["Seq"]
    assert [c.strip() for c in lines[0].split("  ") if c.strip()] == [
        "Seq",
        "Event",
        "Recorded At",
        "Workflow Refs",
    ]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["1", "ScheduleCreated"],
        ["2", "SchedulePaused"],
    ]
    assert result.stderr == "More events available (--after-sequence 2)\n"
    rest = almanac("schedules", "history", "paged", "--after-sequence", "2", "-o", "json")
    body = json.loads(rest.stdout)
    assert [e["sequence"] for e in body["events"]] == [3] and body["has_more"] is False
    missing = almanac("schedules", "history", "nope")
    assert missing.exit_code == 1 and missing.stderr.startswith("error NOT_FOUND: ")


def test_changes_are_recorded_with_the_cli_source(almanac, sdk, tmp_path):
    save(almanac, tmp_path, schedule_body("sourced"))
    sdk.schedule("sourced").pause()
    events = list(sdk.iter_schedule_history("sourced"))
    sources = [e.payload["command_context"]["source"] for e in events]
    assert sources == ["cli", "sdk"]


def test_state_changes_need_the_current_revision(almanac, sdk):
    sdk.save_schedule(schedule_body("toggle"))
    steps = [("pause", 1), ("resume", 2), ("disable", 3), ("enable", 4), ("delete", 5)]
    statuses = []
    for verb, revision in steps:
        result = almanac("schedules", verb, "toggle", "--revision", str(revision), "-o", "json")
        assert result.exit_code == 0, (verb, result.stderr)
        body = json.loads(result.stdout)
        assert body["revision"] == revision + 1
        statuses.append(body["status"])
    assert statuses == ["paused", "active", "paused", "active", "deleted"]


def test_a_stale_revision_exits_1_naming_the_code_and_the_current_revision(almanac, sdk):
    sdk.save_schedule(schedule_body("stale"))
    sdk.schedule("stale").pause()
    result = almanac("schedules", "resume", "stale", "--revision", "1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error SCHEDULE_REVISION: ")
    assert "(current revision: 2)" in result.stderr
    assert sdk.get_schedule("stale").status == "paused"


def test_trigger_starts_a_run_and_a_deleted_schedule_refuses(almanac, sdk):
    sdk.save_schedule(schedule_body("manual", overlap_policy="allow_all"))
    result = almanac("schedules", "trigger", "manual", "--reason", "rerun_after_fix", "-o", "json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["outcome"] == "triggered" and body["run_id"].startswith("schedule:manual:manual:")
    assert sdk.get_run(body["run_id"]).schedule_id == "manual"
    # The reason reaches the schedule's history, as pause/resume/delete's do.
    triggered = [
        e for e in sdk.iter_schedule_history("manual") if e.event_type == "ScheduleTriggered"
    ]
    context = triggered[0].payload["command_context"]
    assert context["reason"] == "rerun_after_fix" and context["source"] == "cli"
    ledger = almanac("schedules", "occurrences", "manual", "--all", "-o", "jsonl")
    assert [json.loads(line)["run_id"] for line in ledger.stdout.splitlines()] == [body["run_id"]]
    backfilled = almanac(
        "schedules",
        "backfill",
        "manual",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T02:00:00Z",
        "--reason",
        "missed in outage",
    )
    assert backfilled.exit_code == 0, backfilled.stderr
    reasons = [
        e.payload["command_context"]["reason"]
        for e in sdk.iter_schedule_history("manual")
        if e.event_type == "ScheduleTriggered"
    ]
    assert reasons == ["rerun_after_fix", "missed in outage", "missed in outage"]
    sdk.schedule("manual").delete()
    refused = almanac("schedules", "trigger", "manual")
    assert refused.exit_code == 1 and refused.stderr.startswith("error SCHEDULE_DELETED: ")
    missing = almanac("schedules", "occurrences", "nope")
    assert missing.exit_code == 1 and missing.stderr.startswith("error NOT_FOUND: ")


class Ledger(JsonHandler):
    """A schedule's ledger page as the server writes it: manual instants to the millisecond,
    skipped ranges with their end, long run ids."""

    page = {
        "items": [
            {
                "kind": "started",
                "instant": "2027-11-10T17:12:13.456Z",
                "through": None,
                "count": 1,
                "reason": None,
                "run_id": "schedule:nightly-invoice-sync-eu-west:manual:1826033533456",
                "origin": "manual",
            },
            {
                "kind": "skipped",
                "instant": "2027-11-10T09:00:00Z",
                "through": "2027-11-10T16:00:00Z",
                "count": 8,
                "reason": "overlap_policy_skip",
                "run_id": None,
                "origin": "scheduled",
            },
        ],
        "next_cursor": None,
    }

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        self.send_json(200, Ledger.page)


def test_occurrences_print_instants_whole_in_80_columns(tmp_path, monkeypatch):
    """At 80 columns the Instant column was cut (`2027-11-10T17:12:1…`) while Through, shorter,
    was printed whole: every instant is printed whole, the other cells are cut to fit."""
    monkeypatch.setenv("COLUMNS", "80")
    with serving(Ledger) as url:
        result = run_cli(url, tmp_path, "schedules", "occurrences", "nightly-invoice-sync-eu-west")
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["Kind", "Instant", "Through", "Reason", "Run"]
    assert len(rows) == 2 and all(len(line) <= 80 for line in [header, *rows]), rows
    assert rows[0].split()[:3] == ["started", "2027-11-10T17:12:13.456Z", "-"]
    assert rows[1].split()[:3] == ["skipped", "2027-11-10T09:00:00Z", "2027-11-10T16:00:00Z"]
    assert "…" in rows[0]  # the run id is still cut to fit


def run_on_a_terminal(args, env):
    """Run the installed command with stderr on a pseudo-terminal: (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "almanac"), *args], env=env, stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    stdout, _ = proc.communicate(timeout=300)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO once the terminal's other side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.returncode, stdout.decode(), b"".join(chunks).decode(errors="replace")


def test_a_1500_occurrence_backfill_is_split_and_starts_1500_runs(almanac, sdk):
    sdk.save_schedule(schedule_body("minutely", "* * * * *"))
    env = {k: v for k, v in os.environ.items() if v is not None} | {
        k: v for k, v in almanac.env.items() if v is not None
    }
    code, stdout, terminal = run_on_a_terminal(
        [
            "schedules",
            "backfill",
            "minutely",
            "--from",
            "2026-10-01T00:00:00Z",
            "--to",
            "2026-10-02T01:00:00Z",
            "--overlap-policy",
            "allow_all",
        ],
        env,
    )
    assert code == 0, terminal
    summary = dict(line.split() for line in stdout.splitlines())
    assert summary == {
        "started": "1500",
        "skipped": "0",
        "already_started": "0",
        "occurrences": "1500",
        "requests": "3",  # the whole range (refused as too large), then its two halves
    }
    assert "backfill" in terminal and "100%" in terminal  # the progress bar, on the terminal
    runs = list(sdk.list_runs(schedule_id="minutely", limit=100))
    assert len(runs) == 1500
    assert len({run.run_id for run in runs}) == 1500
    again = almanac(
        "schedules",
        "backfill",
        "minutely",
        "--from",
        "2026-10-01T00:00:00Z",
        "--to",
        "2026-10-01T00:10:00Z",
        "-o",
        "json",
    )
    assert again.stderr == ""  # no progress bar when stderr is not a terminal
    merged = json.loads(again.stdout)
    # The merged result of every request: the API's keys, and how many requests were sent.
    assert set(merged) == {"results", "started", "skipped", "requests"}
    assert (merged["started"], merged["requests"]) == (0, 1)
    assert {r["outcome"] for r in merged["results"]} == {"already_started"}


def test_a_backfill_with_to_before_from_exits_1(almanac, sdk):
    sdk.save_schedule(schedule_body("reversed"))
    window = ["--from", "2026-10-01T00:00:00Z", "--to", "2026-10-01T03:00:00Z"]
    done = almanac("schedules", "backfill", "reversed", *window, "-o", "jsonl")
    assert done.exit_code == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["occurrence_time"] for r in results] == [
        "2026-10-01T00:00:00Z",
        "2026-10-01T01:00:00Z",
        "2026-10-01T02:00:00Z",
    ]
    result = almanac(
        "schedules",
        "backfill",
        "reversed",
        "--from",
        "2026-10-02T00:00:00Z",
        "--to",
        "2026-10-01T00:00:00Z",
    )
    assert result.exit_code == 1 and result.stderr.startswith("error VALIDATION: ")
    garbage = almanac("schedules", "backfill", "reversed", "--from", "soon", "--to", "later")
    assert garbage.exit_code == 2 and "not an ISO-8601 instant" in garbage.stderr


def test_tables_fit_80_columns_but_print_ids_whole(almanac, sdk):
    """Cells are cut to fit, but not a list's ids: another command takes them (a cut id
    "daily-invoice-s…" named nothing)."""
    medium_id = "daily-invoice-sync-eu-west"
    body = schedule_body(medium_id, "0 9 * * 1-5", timezone="America/New_York")
    body["spec"] = {"cron_expressions": ["0 9 * * 1-5", "30 17 * * 1-5"], "timezone": "UTC"}
    body["notes"] = "n" * 200
    del body["cron"], body["timezone"]
    sdk.save_schedule(body)
    lines = almanac("schedules", "list").stdout.splitlines()
    assert len(lines) == 2
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[1].startswith(medium_id + " ")
    long_id = "a-very-long-schedule-identifier-" + "x" * 60
    sdk.save_schedule(body | {"schedule_id": long_id})
    lines = almanac("schedules", "list").stdout.splitlines()
    row = next(line for line in lines if line.startswith("a-very"))
    assert row.split()[0] == long_id  # whole: the row is wider than 80 instead
    assert "…" in row  # the other cells are still cut
    assert all(
        len(line) <= 80 for line in almanac("schedules", "read", long_id).stdout.splitlines()
    )


def test_dot_ids_and_namespaces_name_themselves_not_another_resource(almanac, sdk, live, tmp_path):
    sdk.save_schedule(schedule_body("listed"))
    for dots in (".", ".."):
        read = almanac("schedules", "read", dots)
        assert read.exit_code == 1 and read.stderr.startswith("error NOT_FOUND: "), read.stdout
        body = json.dumps(schedule_body("dotted"))
        saved = almanac("schedules", "save", "--request", "-", "-n", dots, input=body)
        assert saved.exit_code == 1 and saved.stderr.startswith("error NOT_FOUND: ")
    with Client(live.url, live.token, "default") as default:
        assert "dotted" not in [s.schedule_id for s in default.list_schedules()]
    assert [s.schedule_id for s in sdk.list_schedules()] == ["listed"]
    with pytest.raises(NotFound):
        sdk.get_schedule("..")


def test_all_as_json_prints_nothing_when_the_first_page_fails(almanac):
    for command in (("schedules", "list"), ("runs", "list"), ("workflows", "list")):
        failed = almanac(*command, "--all", "-o", "json", "-n", "no-such-namespace")
        assert failed.exit_code == 1 and failed.stderr.startswith("error NOT_FOUND: ")
        assert failed.stdout == ""
    empty = almanac("schedules", "list", "--all", "-o", "json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == {"items": []}


def test_repeated_labels_with_one_key_must_all_match(almanac, sdk):
    sdk.save_schedule(schedule_body("even", labels={"grp": "even", "team": "a"}))
    sdk.save_schedule(schedule_body("odd", labels={"grp": "odd", "team": "a"}))

    def ids(*labels):
        args = [arg for label in labels for arg in ("--label", label)]
        result = almanac("schedules", "list", *args, "-o", "jsonl")
        assert result.exit_code == 0, result.stderr
        return sorted(json.loads(line)["schedule_id"] for line in result.stdout.splitlines())

    assert ids("grp:odd") == ["odd"]
    assert ids("team:a") == ["even", "odd"]
    assert ids("grp:even", "grp:odd") == []
    assert ids("team:a", "grp:even") == ["even"]
    # Read as the server reads a label: `key=value` too; one without a separator is refused.
    assert ids("grp=odd") == ["odd"]
    refused = almanac("schedules", "list", "--label", "bad")
    assert refused.exit_code == 2 and "'bad' is not key:value" in refused.stderr
    assert [
        s.schedule_id for s in sdk.list_schedules(labels=[("grp", "even"), ("grp", "odd")])
    ] == []


def test_text_a_terminal_would_act_on_is_printed_as_its_escapes(almanac, sdk):
    # Clear the screen, set the window title, ring, backspace over text, reverse what follows.
    hostile = "x\x1b[31mRED\x1b[0m\x1b]0;pwned\x07\x1b[2J\r\nnext\b\bXX \u202eabc \x9b2J é"
    sdk.save_schedule(schedule_body("loud"))
    sdk.pause_schedule("loud", 1, hostile)
    shown = almanac("schedules", "read", "loud", COLUMNS="200")
    assert shown.exit_code == 0, shown.stderr
    (reason,) = [line for line in shown.stdout.splitlines() if line.startswith("paused_reason")]
    assert reason.split(None, 1)[1] == (
        "x\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07\\x1b[2J next\\x08\\x08XX \\u202eabc \\x9b2J é"
    )
    assert not any(ch in shown.stdout for ch in "\x1b\x07\x08\x9b\u202e\r")
    # JSON output reads back as the same text, with those characters as JSON escapes.
    raw = almanac("schedules", "read", "loud", "-o", "json")
    assert json.loads(raw.stdout)["paused_reason"] == hostile
    assert not any(ch in raw.stdout for ch in "\x1b\x07\x08\x9b\u202e\r")
    assert "\\u009b2J" in raw.stdout and "\\u202eabc" in raw.stdout


def test_json_cells_show_text_as_it_reads_and_controls_as_escapes(almanac, sdk):
    action = {"workflow": "noop-flow", "input": {"名前": "café", "bell": "\x07\x1b[2J"}}
    sdk.save_schedule(schedule_body("named", action=action))
    shown = almanac("schedules", "read", "named", COLUMNS="200")
    (line,) = [line for line in shown.stdout.splitlines() if line.startswith("action")]
    assert '"input":{"bell":"\\u0007\\u001b[2J","名前":"café"}' in line, line
    # JSON leaves C1 controls, DEL and bidirectional overrides as they are: the cell does not.
    started = almanac(
        "runs", "start", "noop-flow", "--input", '{"m": "\\u009b2J \\u202eabc \\u007f"}'
    )
    assert started.exit_code == 0, started.stderr
    (given,) = [line for line in started.stdout.splitlines() if line.startswith("input")]
    assert given.split(None, 1)[1] == '{"m":"\\x9b2J \\u202eabc \\x7f"}'
    assert not any(ch in shown.stdout + started.stdout for ch in "\x1b\x07\x9b\u202e\x7f")


def test_an_error_naming_hostile_text_prints_it_as_its_escapes(almanac):
    body = schedule_body("bad", labels={"k\x1b]0;pwned\x07": "v"})
    result = almanac("schedules", "save", "--request", "-", input=json.dumps(body))
    assert result.exit_code == 1
    assert "labels.k\\x1b]0;pwned\\x07" in result.stderr, result.stderr
    assert not any(ch in result.stderr for ch in "\x1b\x07")


def test_the_calendar_column_names_an_intervals_offset():
    """`every PT6H (UTC)` stood for PT6H offset PT5M too: another calendar."""
    from almanac.cli.schedules import calendar_text

    spec = {
        "cron_expressions": ["0 9 * * *"],
        "intervals": [{"every": "PT6H", "offset": "PT5M"}, {"every": "PT1H", "offset": "PT0S"}],
        "timezone": "Europe/Paris",
    }
    assert calendar_text({"spec": spec}) == (
        "0 9 * * *; every PT6H offset PT5M; every PT1H (Europe/Paris)"
    )
