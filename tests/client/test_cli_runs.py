"""`almanac workflows|activations|runs|tasks|calendar|auth` against a live server."""

from __future__ import annotations

import json
import unicodedata

from almanac import Client

APPROVAL = {
    "name": "approval",
    "input_schema": {"type": "object"},
    "steps": [
        {"id": "ask", "type": "signal", "signal": "approve", "timeout_seconds": 3600},
        {"id": "review", "type": "task", "title": "Check totals", "timeout_seconds": 3600},
    ],
}


def as_json(result):
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def lines(result):
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_workflows_deploy_list_show_and_errors(almanac, tmp_path):
    path = tmp_path / "approval.json"
    path.write_text(json.dumps(APPROVAL))
    deployed = as_json(almanac("workflows", "deploy", str(path), "-o", "json"))
    assert (deployed["name"], deployed["version"]) == ("approval", 1)
    names = [w["name"] for w in lines(almanac("workflows", "list", "--all", "-o", "jsonl"))]
    assert names == ["approval", "noop-flow"]
    shown = as_json(almanac("workflows", "show", "approval", "-o", "json"))
    assert shown["versions"][0]["version"] == 1
    table = almanac("workflows", "list")
    assert table.stdout.splitlines()[0].split() == ["Name", "Version", "Steps", "Updated", "At"]
    missing = almanac("workflows", "show", "nope")
    assert missing.exit_code == 1 and missing.stderr.startswith("error NOT_FOUND: ")
    path.write_text(json.dumps({"name": "broken", "steps": [{"id": "a", "type": "teleport"}]}))
    invalid = almanac("workflows", "deploy", str(path))
    assert invalid.exit_code == 1 and invalid.stderr.startswith("error VALIDATION: ")


def test_activations_create_list_retire_and_errors(almanac):
    created = as_json(almanac("activations", "create", "noop-flow", "-o", "json"))
    assert created["status"] == "ready"
    listed = lines(almanac("activations", "list", "--all", "-o", "jsonl"))
    assert created["id"] in [a["id"] for a in listed] and len(listed) == 2
    retired = as_json(almanac("activations", "retire", created["id"], "-o", "json"))
    assert retired["status"] == "retired"
    ready = lines(almanac("activations", "list", "--status", "ready", "-o", "jsonl"))
    assert created["id"] not in [a["id"] for a in ready]
    missing = almanac("activations", "create", "nope")
    assert missing.exit_code == 1 and missing.stderr.startswith("error NOT_FOUND: ")


def test_a_run_through_signal_and_task_from_the_terminal(almanac, sdk, tmp_path):
    sdk.deploy_workflow(APPROVAL)
    sdk.create_activation("approval")
    started = as_json(
        almanac("runs", "start", "approval", "--input", '{"n": 1}', "--run-id", "r-1", "-o", "json")
    )
    assert (started["run_id"], started["input"]) == ("r-1", {"n": 1})
    sdk.tick(work=True)
    assert as_json(almanac("runs", "show", "r-1", "-o", "json"))["status"] == "waiting"
    signal = as_json(almanac("runs", "signal", "r-1", "approve", "--payload", "true", "-o", "json"))
    assert signal["status"] == "delivered"
    sdk.tick(work=True)
    tasks = lines(almanac("tasks", "list", "--status", "open", "-o", "jsonl"))
    assert [(t["run_id"], t["title"]) for t in tasks] == [("r-1", "Check totals")]
    done = almanac("tasks", "complete", str(tasks[0]["id"]), "--output-json", '{"ok": true}')
    assert done.exit_code == 0, done.stderr
    sdk.tick(work=True)
    assert sdk.get_run("r-1").status == "completed"
    events = [
        e["event_type"] for e in lines(almanac("runs", "history", "r-1", "--all", "-o", "jsonl"))
    ]
    assert events[0] == "run_started" and events[-1] == "run_completed"
    assert "signal_received" in events and "task_completed" in events
    assert as_json(almanac("runs", "replay", "r-1", "-o", "json"))["agree"] is True
    listed = lines(almanac("runs", "list", "--workflow", "approval", "--all", "-o", "jsonl"))
    assert [r["run_id"] for r in listed] == ["r-1"]


def test_cancel_and_terminate_from_the_terminal(almanac, sdk):
    sdk.deploy_workflow(APPROVAL)
    sdk.create_activation("approval")
    for run_id in ("c-1", "t-1"):
        sdk.start_run("approval", run_id=run_id)
    sdk.tick(work=True)
    cancelled = as_json(almanac("runs", "cancel", "c-1", "--reason", "not needed", "-o", "json"))
    assert cancelled["status"] == "cancelled"
    terminated = as_json(almanac("runs", "terminate", "t-1", "-o", "json"))
    assert terminated["status"] == "terminated"
    again = almanac("runs", "signal", "c-1", "approve")
    assert again.exit_code == 1 and again.stderr.startswith("error CONFLICT: ")


def test_run_errors_exit_1_or_2(almanac):
    assert almanac("runs", "show", "nope").stderr.startswith("error NOT_FOUND: ")
    bad_status = almanac("runs", "list", "--status", "bogus")
    assert bad_status.exit_code == 1 and bad_status.stderr.startswith("error VALIDATION: ")
    bad_json = almanac("runs", "start", "noop-flow", "--input", "{nope")
    assert bad_json.exit_code == 2 and "not JSON" in bad_json.stderr
    # A key given twice is refused here, as the server refuses it (it sent the last value).
    twice = almanac("runs", "start", "noop-flow", "--input", '{"a": 1, "a": 2}')
    assert twice.exit_code == 2 and "'a' is given twice" in twice.stderr
    unknown = almanac("tasks", "complete", "999999", "--output-json", "1")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error NOT_FOUND: ")


def test_calendar_preview_and_its_error(almanac):
    body = as_json(
        almanac(
            "calendar",
            "preview",
            "--cron",
            "0 2 * * *",
            "--timezone",
            "America/New_York",
            "--count",
            "3",
            "-o",
            "json",
        )
    )
    assert len(body["occurrences"]) == 3
    assert all(
        o["local"].endswith(("02:00:00-05:00", "02:00:00-04:00")) for o in body["occurrences"]
    )
    intervals = as_json(
        almanac("calendar", "preview", "--interval", "PT6H/PT5M", "--count", "2", "-o", "json")
    )
    assert all(o["at"][14:19] == "05:00" for o in intervals["occurrences"])
    rows = lines(
        almanac("calendar", "preview", "--cron", "0 2 * * *", "--count", "3", "-o", "jsonl")
    )
    assert [row["at"][11:] for row in rows] == ["02:00:00Z"] * 3
    # Jitter as a save takes it, drawn from the schedule named (a stand-in for one not saved).
    jittered = {
        name: [
            row["at"]
            for row in lines(
                almanac(
                    "calendar", "preview", "--cron", "0 2 * * *", "--count", "3",
                    "--jitter", "600", "--schedule", name, "-o", "jsonl",
                )
            )
        ]
        for name in ("nightly-a", "nightly-b")
    }  # fmt: skip
    assert jittered["nightly-a"] != jittered["nightly-b"]
    assert all("02:00:00Z" <= at[11:] < "02:10:00Z" for ats in jittered.values() for at in ats)
    bad = almanac("calendar", "preview", "--cron", "61 * * * *")
    assert bad.exit_code == 1 and bad.stderr.startswith("error CALENDAR_INVALID: ")
    none = almanac("calendar", "preview")
    assert none.exit_code == 2


def test_calendar_preview_prints_times_and_notes_whole_in_80_columns(almanac):
    """Off a terminal (80 columns) the Local time and the DST note were cut with `…`: times
    are printed whole and the note goes on under itself."""
    args = ["calendar", "preview", "--cron", "30 2 * 3 0", "--timezone", "America/New_York"]
    expected = as_json(almanac(*args, "--count", "10", "-o", "json"))["occurrences"]
    assert any(o["note"] for o in expected)
    result = almanac(*args, "--count", "10")
    assert result.exit_code == 0, result.stderr
    rows = result.stdout.splitlines()
    assert all(len(row) <= 80 for row in rows) and "…" not in result.stdout, rows
    start = rows[0].index("Note")
    printed: list[dict[str, str]] = []
    for row in rows[1:]:
        if row[:1].strip():
            at, local, offset = row[:start].split()
            printed.append({"at": at, "local": local, "utc_offset": offset, "note": row[start:]})
        else:
            assert not row[:start].strip(), row
            printed[-1]["note"] += " " + row[start:]
    assert printed == [o | {"note": o["note"] or "-"} for o in expected]


def test_auth_status_shows_who_you_are_and_a_bad_token_exits_1(almanac, live, namespace):
    status = almanac("auth", "status")
    assert status.exit_code == 0, status.stderr
    assert "signed in as admin (superuser)" in status.stdout
    assert f"namespace in use: {namespace}" in status.stdout
    body = as_json(almanac("auth", "status", "-o", "json"))
    assert body["username"] == "admin" and body["superuser"] is True
    assert {"name": namespace, "role": "admin"} in body["namespaces"]
    with Client(live.url, live.token) as client:
        assert client.me().username == "admin"
    bad = almanac("auth", "status", "--token", "wrong")
    assert bad.exit_code == 1 and bad.stderr.startswith("error UNAUTHENTICATED: ")


EVERY_COMMAND = [
    ["auth", "status"],
    ["schedules", "read", "s"],
    ["schedules", "list"],
    ["schedules", "history", "s"],
    ["schedules", "occurrences", "s"],
    *[["schedules", verb, "s", "--revision", "1"] for verb in ("pause", "resume", "disable")],
    *[["schedules", verb, "s", "--revision", "1"] for verb in ("enable", "delete")],
    ["schedules", "trigger", "s"],
    [
        "schedules",
        "backfill",
        "s",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-02T00:00:00Z",
    ],
    ["calendar", "preview", "--cron", "0 * * * *"],
    ["workflows", "list"],
    ["workflows", "show", "noop-flow"],
    ["activations", "create", "noop-flow"],
    ["activations", "list"],
    ["activations", "retire", "a"],
    ["runs", "start", "noop-flow"],
    ["runs", "list"],
    ["runs", "show", "r"],
    ["runs", "history", "r"],
    ["runs", "signal", "r", "go"],
    ["runs", "cancel", "r"],
    ["runs", "terminate", "r"],
    ["runs", "replay", "r"],
    ["tasks", "list"],
    ["tasks", "complete", "1", "--output-json", "1"],
]


def test_every_command_with_a_wrong_token_exits_1_unauthenticated(almanac):
    for args in EVERY_COMMAND:
        result = almanac(*args, "--token", "wrong-token")
        assert result.exit_code == 1, args
        assert result.stderr.startswith("error UNAUTHENTICATED: "), (args, result.stderr)
        assert result.stdout == "" and "wrong-token" not in result.stderr


def test_every_state_change_with_a_stale_revision_exits_1(almanac, sdk):
    sdk.save_schedule(
        {"schedule_id": "s", "cron": "0 * * * *", "action": {"workflow": "noop-flow"}}
    )
    sdk.schedule("s").pause()
    for verb in ("pause", "resume", "disable", "enable", "delete"):
        result = almanac("schedules", verb, "s", "--revision", "1")
        assert result.exit_code == 1
        assert "error SCHEDULE_REVISION: " in result.stderr
        assert result.stderr.rstrip().endswith("(current revision: 2)")


def test_auth_setup_without_a_token_is_a_usage_error(almanac):
    result = almanac("auth", "setup", "--url", "http://127.0.0.1:9", ALMANAC_TOKEN=None)
    assert result.exit_code == 2 and "--token" in result.stderr


STUCK = {
    "name": "stuck",
    "on_step_failure": "incident",
    "steps": [{"id": "charge", "type": "action", "action": "fail"}],
}
REVIEW = {"name": "review", "steps": [{"id": "check", "type": "task", "title": "Check"}]}


def test_every_list_pages_with_limit_and_the_cursor_its_hint_names(almanac, sdk):
    for definition in (STUCK, REVIEW):
        sdk.deploy_workflow(definition)
        sdk.create_activation(definition["name"])
    for index in range(2):
        sdk.start_run("stuck", run_id=f"stuck-{index}")
        sdk.start_run("review", run_id=f"review-{index}")
    sdk.tick(work=True)
    assert len(list(sdk.list_incidents())) == 2 and len(list(sdk.list_tasks())) == 2
    for command, key in (
        (["runs", "list"], "run_id"),
        (["runs", "history", "stuck-0"], "sequence"),
        (["workflows", "list"], "name"),
        (["activations", "list"], "id"),
        (["tasks", "list"], "id"),
        (["incidents", "list"], "id"),
    ):
        first = almanac(*command, "--limit", "1", "-o", "json")
        body = as_json(first)
        assert len(body["items"]) == 1 and body["next_cursor"], command
        table = almanac(*command, "--limit", "1")
        assert table.stderr == f"More items available (--cursor {body['next_cursor']})\n"
        following = as_json(
            almanac(*command, "--limit", "1", "--cursor", body["next_cursor"], "-o", "json")
        )
        assert len(following["items"]) == 1, command
        assert following["items"][0][key] != body["items"][0][key], command


def test_tables_with_wide_characters_fit_80_columns_and_stay_aligned(almanac, sdk):
    title = "請求書の合計金額を確認して承認してください" * 3
    sdk.deploy_workflow({"name": "wide", "steps": [{"id": "t", "type": "task", "title": title}]})
    sdk.create_activation("wide")
    sdk.deploy_workflow(
        {"name": "mixed", "steps": [{"id": "t", "type": "task", "title": "Cafe\u0301 確認"}]}
    )
    sdk.create_activation("mixed")
    sdk.start_run("wide", run_id="wide-1")
    sdk.start_run("mixed", run_id="mixed-1")
    sdk.tick(work=True)
    result = almanac("tasks", "list")
    assert result.exit_code == 0, result.stderr
    rows = result.stdout.splitlines()
    assert len(rows) == 3

    def columns(line: str) -> int:
        """Terminal columns: wide characters take two, combining accents none."""
        wide = sum(unicodedata.east_asian_width(c) in "WF" for c in line)
        return len(line) + wide - sum(bool(unicodedata.combining(c)) for c in line)

    assert all(columns(row) <= 80 for row in rows), rows
    assert any("…" in row for row in rows[1:])
    words = ["Status", "open", "open"]
    status_at = {columns(row[: row.index(w)]) for row, w in zip(rows, words, strict=True)}
    assert len(status_at) == 1, rows


FLAKY = {
    "name": "flaky",
    "on_step_failure": "incident",
    "steps": [
        {"id": "charge", "type": "action", "action": "fail", "retry": {"max_attempts": 1}},
        {"id": "after", "type": "action", "action": "echo", "args": "done"},
    ],
}


def test_incidents_resolve_from_the_sdk_and_the_terminal(almanac, sdk):
    sdk.deploy_workflow(FLAKY)
    sdk.create_activation("flaky")
    for run_id in ("i-1", "i-2"):
        sdk.start_run("flaky", run_id=run_id)
    sdk.tick(work=True)
    opened = {incident.run_id: incident for incident in sdk.list_incidents(status="open")}
    assert set(opened) == {"i-1", "i-2"}
    # The SDK answers the resolved incident, typed, with its report.
    resolved = sdk.resolve_incident("i-1", opened["i-1"].id, "skip", output={"charged": False})
    assert type(resolved).__name__ == "Incident" and resolved.resolution == "skip"
    assert resolved.resolved_at is not None and resolved.report is not None
    # The terminal prints the API's body.
    printed = as_json(
        almanac("incidents", "resolve", str(opened["i-2"].id), "--action", "fail", "-o", "json")
    )
    assert (printed["run_id"], printed["resolution"]) == ("i-2", "fail")
    sdk.tick(work=True)
    assert (sdk.get_run("i-1").status, sdk.get_run("i-2").status) == ("completed", "failed")
