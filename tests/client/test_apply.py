"""`almanac schedules apply`: schedules as code, idempotent, with --prune and --dry-run."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from almanac.cli import cli
from tests.client.conftest import JsonHandler, schedule_body, serving


def write_folder(folder, count=20):
    folder.mkdir()
    for index in range(count):
        body = schedule_body(f"job-{index:02d}", f"{index} 2 * * *", labels={"team": "billing"})
        if index % 3 == 0:
            # Long form with non-canonical spellings the server normalizes: still "unchanged".
            body = {
                "schedule_id": f"job-{index:02d}",
                "spec": {
                    "cron_expressions": [f"{index}  2 * * *"],
                    "intervals": [{"every": "PT360M"}],
                    "timezone": "UTC",
                    "start_at": "2026-01-01T00:00:00+00:00",
                },
                "action": {"workflow": "noop-flow", "input": {"mode": "nightly"}},
                "overlap_policy": "skip",
                "labels": {"team": "billing"},
            }
        if index % 5 == 0:
            (folder / f"job-{index:02d}.yaml").write_text(yaml.safe_dump(body))
        else:
            (folder / f"job-{index:02d}.json").write_text(json.dumps(body, indent=2))


def plan_of(result):
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    return body, {step["schedule_id"]: step["action"] for step in body["plan"]}


def revisions(sdk):
    return {s.schedule_id: s.revision for s in sdk.list_schedules(include_deleted=True)}


def test_apply_creates_is_idempotent_updates_one_and_prunes_one(almanac, sdk, tmp_path):
    folder = tmp_path / "schedules"
    write_folder(folder)
    first, actions = plan_of(almanac("schedules", "apply", str(folder), "-o", "json"))
    assert set(actions.values()) == {"create"} and len(actions) == 20
    assert first["summary"] == {"created": 20, "updated": 0, "unchanged": 0, "deleted": 0}
    assert revisions(sdk) == {f"job-{i:02d}": 1 for i in range(20)}
    history_before = len(list(sdk.iter_schedule_history("job-03")))

    second, actions = plan_of(almanac("schedules", "apply", str(folder), "-o", "json"))
    assert second["summary"] == {"created": 0, "updated": 0, "unchanged": 20, "deleted": 0}
    assert revisions(sdk) == {f"job-{i:02d}": 1 for i in range(20)}
    assert len(list(sdk.iter_schedule_history("job-03"))) == history_before

    edited = json.loads((folder / "job-07.json").read_text())
    edited["cron"] = "45 3 * * *"
    (folder / "job-07.json").write_text(json.dumps(edited))
    table = almanac("schedules", "apply", str(folder))
    assert table.exit_code == 0, table.stderr
    assert "update     job-07  (spec)" in table.stdout.splitlines()
    assert table.stdout.splitlines()[-1] == "0 created, 1 updated, 19 unchanged, 0 deleted"
    after_edit = revisions(sdk)
    assert after_edit.pop("job-07") == 2 and set(after_edit.values()) == {1}
    assert sdk.get_schedule("job-07").spec["cron_expressions"] == ["45 3 * * *"]

    (folder / "job-12.json").unlink()
    dry, actions = plan_of(
        almanac("schedules", "apply", str(folder), "--prune", "--dry-run", "-o", "json")
    )
    assert dry["dry_run"] is True and actions["job-12"] == "delete"
    assert dry["summary"]["deleted"] == 1 and dry["summary"]["unchanged"] == 19
    assert sdk.get_schedule("job-12").status == "active"

    pruned, actions = plan_of(almanac("schedules", "apply", str(folder), "--prune", "-o", "json"))
    assert pruned["summary"] == {"created": 0, "updated": 0, "unchanged": 19, "deleted": 1}
    statuses = {s.schedule_id: s.status for s in sdk.list_schedules(include_deleted=True)}
    assert statuses.pop("job-12") == "deleted" and set(statuses.values()) == {"active"}


def test_dry_run_changes_nothing(almanac, sdk, tmp_path):
    folder = tmp_path / "schedules"
    write_folder(folder, count=3)
    sdk.save_schedule(schedule_body("job-01", "59 23 * * *"))
    sdk.save_schedule(schedule_body("stray"))
    result = almanac("schedules", "apply", str(folder), "--prune", "--dry-run", "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    steps = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(s["schedule_id"], s["action"]) for s in steps] == [
        ("job-00", "create"),
        ("job-01", "update"),
        ("job-02", "create"),
        ("stray", "delete"),
    ]
    assert steps[1]["changed_fields"] == ["spec", "labels"]
    assert revisions(sdk) == {"job-01": 1, "stray": 1}
    assert sdk.get_schedule("stray").status == "active"


def test_apply_errors(almanac, sdk, tmp_path):
    nameless = tmp_path / "nameless.json"
    nameless.write_text(json.dumps({"cron": "0 * * * *", "action": {"workflow": "noop-flow"}}))
    missing_id = almanac("schedules", "apply", str(nameless))
    assert missing_id.exit_code == 2 and "needs its schedule_id" in missing_id.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(schedule_body("bad", "61 * * * *")))
    refused = almanac("schedules", "apply", str(bad))
    assert refused.exit_code == 1 and refused.stderr.startswith("error CALENDAR_INVALID: ")
    assert list(sdk.list_schedules()) == []
    nowhere = almanac("schedules", "apply", str(tmp_path / "nowhere"))
    assert nowhere.exit_code == 2


def test_yaml_dates_and_times_are_sent_as_iso_text_so_dry_run_and_apply_agree(
    almanac, sdk, tmp_path
):
    dated = tmp_path / "dated.yaml"
    dated.write_text(
        "schedule_id: dated\ncron: 0 2 * * *\naction: {workflow: noop-flow}\n"
        "spec: {start_at: 2026-01-01T00:00:00Z}\nnotes: 2026-01-01\n"
    )
    dry, actions = plan_of(almanac("schedules", "apply", str(dated), "--dry-run", "-o", "json"))
    assert actions == {"dated": "create"}
    applied, actions = plan_of(almanac("schedules", "apply", str(dated), "-o", "json"))
    assert actions == {"dated": "create"}
    stored = sdk.get_schedule("dated")
    assert stored.notes == "2026-01-01"
    assert stored.spec["start_at"] == "2026-01-01T00:00:00Z"
    again, actions = plan_of(almanac("schedules", "apply", str(dated), "-o", "json"))
    assert actions == {"dated": "unchanged"}

    naive = tmp_path / "naive.yaml"
    naive.write_text(
        "schedule_id: naive\ncron: 0 2 * * *\naction: {workflow: noop-flow}\n"
        "spec: {start_at: 2026-01-01 00:00:00}\n"
    )
    refused = almanac("schedules", "apply", str(naive))
    assert refused.exit_code == 1, refused.stderr
    assert refused.stderr.startswith("error ") and "start_at" in refused.stderr


def test_a_deleted_id_is_a_conflict_in_the_plan_and_nothing_is_applied(almanac, sdk, tmp_path):
    sdk.save_schedule(schedule_body("gone"))
    sdk.schedule("gone").delete()
    folder = tmp_path / "schedules"
    folder.mkdir()
    for schedule_id in ("alive", "gone"):
        (folder / f"{schedule_id}.json").write_text(json.dumps(schedule_body(schedule_id)))
    dry = almanac("schedules", "apply", str(folder), "--prune", "--dry-run", "-o", "json")
    assert dry.exit_code == 1
    assert dry.stderr.startswith("error SCHEDULE_DELETED: schedule 'gone' is deleted")
    steps = {s["schedule_id"]: s["action"] for s in json.loads(dry.stdout)["plan"]}
    assert steps == {"alive": "create", "gone": "conflict"}
    table = almanac("schedules", "apply", str(folder), "--dry-run")
    assert table.exit_code == 1
    assert "conflict   gone  (deleted: its id is never reused)" in table.stdout.splitlines()
    real = almanac("schedules", "apply", str(folder))
    assert real.exit_code == 1 and real.stdout == ""
    assert real.stderr.startswith("error SCHEDULE_DELETED: schedule 'gone' is deleted")
    assert revisions(sdk) == {"gone": 2}
    (folder / "gone.json").unlink()
    pruned, actions = plan_of(almanac("schedules", "apply", str(folder), "--prune", "-o", "json"))
    assert actions == {"alive": "create"}


def test_the_workflow_shorthand_applies_once_then_is_unchanged(almanac, sdk, tmp_path):
    file = tmp_path / "jw.json"
    body = {"schedule_id": "jw", "cron": "0 5 * * *", "workflow": "noop-flow"}
    file.write_text(json.dumps(body | {"input": {"mode": "nightly"}}))
    _, actions = plan_of(almanac("schedules", "apply", str(file), "-o", "json"))
    assert actions == {"jw": "create"}
    for _ in range(2):
        _, actions = plan_of(almanac("schedules", "apply", str(file), "-o", "json"))
        assert actions == {"jw": "unchanged"}
    assert revisions(sdk) == {"jw": 1}


def test_a_dry_run_asks_the_server_and_reports_what_it_would_refuse(almanac, sdk, tmp_path):
    sdk.save_schedule(schedule_body("kept"))
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "bad1.json").write_text(json.dumps(schedule_body("bad1") | {"bogus_field": 1}))
    (folder / "good.json").write_text(json.dumps(schedule_body("good")))
    (folder / "kept.json").write_text(json.dumps(schedule_body("kept", "61 * * * *")))
    dry = almanac("schedules", "apply", str(folder), "--dry-run", "-o", "json")
    assert dry.exit_code == 1, dry.stdout
    assert dry.stderr.startswith("error VALIDATION: ") and "bogus_field" in dry.stderr
    steps = {s["schedule_id"]: s for s in json.loads(dry.stdout)["plan"]}
    assert [steps[i]["action"] for i in ("bad1", "good", "kept")] == ["create", "create", "update"]
    assert steps["bad1"]["error"]["code"] == "VALIDATION"
    assert steps["bad1"]["file"] == str(folder / "bad1.json")
    assert "error" not in steps["good"]
    assert steps["kept"]["error"]["code"] == "CALENDAR_INVALID"
    table = almanac("schedules", "apply", str(folder), "--dry-run")
    assert table.exit_code == 1
    lines = table.stdout.splitlines()
    assert lines[0] == "create     bad1"
    assert lines[1].startswith(f"  refused ({folder / 'bad1.json'}): error VALIDATION: ")
    assert "    bogus_field: Extra inputs are not permitted" in lines
    assert lines[-1].endswith("; the server would refuse 2")
    assert revisions(sdk) == {"kept": 1}


def test_a_dry_run_reports_a_body_too_large_under_its_step_and_goes_on(almanac, sdk, tmp_path):
    """A 413 stopped the dry run at that body with no plan printed; the real apply reports it
    as the step's failure, so the dry run reports it as the step's refusal."""
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "b.json").write_text(json.dumps(schedule_body("b")))
    (folder / "c.json").write_text(json.dumps(schedule_body("c")))
    (folder / "z.json").write_text(json.dumps(schedule_body("z") | {"notes": "x" * 2_000_000}))
    dry = almanac("schedules", "apply", str(folder), "--dry-run", "-o", "json")
    assert dry.exit_code == 1, dry.output
    steps = {s["schedule_id"]: s for s in json.loads(dry.stdout)["plan"]}
    assert [steps[i]["action"] for i in ("b", "c", "z")] == ["create"] * 3
    assert steps["z"]["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert "error" not in steps["b"] and "error" not in steps["c"]
    table = almanac("schedules", "apply", str(folder), "--dry-run")
    assert table.exit_code == 1
    assert f"  refused ({folder / 'z.json'}): error PAYLOAD_TOO_LARGE: " in table.stdout
    assert table.stdout.splitlines()[-1].endswith("; the server would refuse 1")
    assert revisions(sdk) == {}


def test_a_failed_apply_reports_what_it_applied_and_where_it_stopped(almanac, sdk, tmp_path):
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(schedule_body("a")))
    (folder / "b.json").write_text(json.dumps(schedule_body("b") | {"bogus": 1}))
    (folder / "c.json").write_text(json.dumps(schedule_body("c")))
    table = almanac("schedules", "apply", str(folder))
    assert table.exit_code == 1
    assert table.stderr.startswith("error VALIDATION: ")
    assert table.stdout.splitlines() == [
        "create     a",
        "create     b",
        f"  failed ({folder / 'b.json'}): " + table.stderr.splitlines()[0],
        "    bogus: Extra inputs are not permitted",
        "stopped at b: 1 created, 0 updated, 0 unchanged, 0 deleted; nothing after it was tried",
    ]
    assert revisions(sdk) == {"a": 1}

    (folder / "d.json").write_text(json.dumps(schedule_body("d", "61 * * * *")))
    (folder / "b.json").write_text(json.dumps(schedule_body("b")))
    body = almanac("schedules", "apply", str(folder), "-o", "json")
    assert body.exit_code == 1 and body.stderr.startswith("error CALENDAR_INVALID: ")
    report = json.loads(body.stdout)
    assert [(s["schedule_id"], s["action"]) for s in report["plan"]] == [
        ("a", "unchanged"),
        ("b", "create"),
        ("c", "create"),
        ("d", "create"),
    ]
    assert report["plan"][3]["error"]["code"] == "CALENDAR_INVALID"
    assert report["plan"][3]["file"] == str(folder / "d.json")
    assert report["summary"] == {"created": 2, "updated": 0, "unchanged": 1, "deleted": 0}
    assert report["dry_run"] is False

    (folder / "e.json").write_text(json.dumps(schedule_body("e") | {"bogus": 1}))
    lines = almanac("schedules", "apply", str(folder), "-o", "jsonl")
    assert lines.exit_code == 1
    steps = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(s["schedule_id"], "error" in s) for s in steps] == [
        ("a", False),
        ("b", False),
        ("c", False),
        ("d", True),
    ]
    assert revisions(sdk) == {"a": 1, "b": 1, "c": 1}


def test_a_body_the_server_would_refuse_is_never_unchanged(almanac, sdk, tmp_path):
    file = tmp_path / "tp.json"
    body = {"schedule_id": "tp", "cron": "0 6 * * *", "workflow": "noop-flow"}
    file.write_text(json.dumps(body))
    _, actions = plan_of(almanac("schedules", "apply", str(file), "-o", "json"))
    assert actions == {"tp": "create"}
    # Python's `False == 0` and a dropped unknown key made both look unchanged.
    file.write_text(json.dumps(body | {"overlap_polcy": "allow_all", "jitter_seconds": False}))
    for args in (["--dry-run"], []):
        result = almanac("schedules", "apply", str(file), *args)
        assert result.exit_code == 1, result.stdout
        assert result.stdout.splitlines()[0] == "update     tp  (jitter_seconds, overlap_polcy)"
        assert result.stderr.startswith("error VALIDATION: ")
        assert "overlap_polcy" in result.stderr and "jitter_seconds" in result.stderr
    for edit in ({"jitter_seconds": 0.0}, {"id": "other"}, {"action": {"workflow": "noop-flow"}}):
        file.write_text(json.dumps(body | edit))
        result = almanac("schedules", "apply", str(file))
        assert result.exit_code == 1, result.stdout
        assert result.stderr.startswith("error VALIDATION: ")
    assert revisions(sdk) == {"tp": 1}


class ForbidsDeletes(JsonHandler):
    """A stand-in server holding one schedule, `stray`, that the caller may not delete."""

    stray = {
        "schedule_id": "stray",
        "uid": "u-1",
        "namespace": "default",
        "revision": 1,
        "status": "active",
        "spec": {"cron_expressions": ["0 * * * *"]},
        "action": {"workflow": "noop-flow"},
        "overlap_policy": "skip",
        "missed_policy": "skip",
        "jitter_seconds": 0,
        "fires_count": 0,
    }

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        self.send_json(200, {"items": [self.stray], "next_cursor": None})

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        error = {"code": "FORBIDDEN", "message": "you may not delete schedules here"}
        self.send_json(403, {"error": error})


def test_a_failed_prune_delete_names_the_step_it_failed_at(tmp_path):
    folder = tmp_path / "schedules"
    folder.mkdir()
    with serving(ForbidsDeletes) as url:
        env = {"ALMANAC_URL": url, "ALMANAC_TOKEN": "tok", "XDG_CONFIG_HOME": str(tmp_path)}
        result = CliRunner().invoke(cli, ["schedules", "apply", str(folder), "--prune"], env=env)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "delete     stray",
        "  failed (delete stray): error FORBIDDEN: you may not delete schedules here",
    ]
    assert lines[2].startswith("stopped at stray: 0 created, 0 updated, 0 unchanged, 0 deleted")


def test_every_usage_error_of_apply_names_the_file_as_the_command_line_reaches_it(
    almanac, tmp_path
):
    folder = tmp_path / "mix"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(schedule_body("a")))
    (folder / "b.json").write_text("{not json")
    malformed = almanac("schedules", "apply", str(folder))
    assert malformed.exit_code == 2
    assert f"Invalid value: {folder / 'b.json'}: " in malformed.stderr
    (folder / "b.json").write_text(json.dumps(schedule_body("a")))
    twice = almanac("schedules", "apply", str(folder))
    assert twice.exit_code == 2
    assert f"Invalid value: {folder / 'b.json'}: 'a' is also in {folder / 'a.json'}" in twice.stderr


def test_an_apply_of_a_schedule_with_a_secret_input_settles(almanac, sdk, tmp_path):
    # The server shows a secret as ***, so the plan cannot compare it and sends an update each
    # time: every re-run wrote a revision and an audit event. The server now writes nothing
    # for a save that changes nothing, and apply reports the step as unchanged.
    schema = {"type": "object", "properties": {"pw": {"type": "string", "x-secret": True}}}
    steps = [{"id": "a", "type": "action", "action": "noop"}]
    sdk.deploy_workflow({"name": "secret-flow", "input_schema": schema, "steps": steps})
    sdk.create_activation("secret-flow")
    folder = tmp_path / "secret"
    folder.mkdir()
    body = schedule_body("with-secret", "0 4 * * *")
    body["action"] = {"workflow": "secret-flow", "input": {"pw": "apply-secret-7e1f"}}
    (folder / "s.json").write_text(json.dumps(body))
    first, _ = plan_of(almanac("schedules", "apply", str(folder), "-o", "json"))
    assert first["summary"]["created"] == 1
    history = len(list(sdk.iter_schedule_history("with-secret")))
    for _ in range(2):
        again, actions = plan_of(almanac("schedules", "apply", str(folder), "-o", "json"))
        assert actions == {"with-secret": "unchanged"}, again
        assert again["summary"] == {"created": 0, "updated": 0, "unchanged": 1, "deleted": 0}
    assert revisions(sdk)["with-secret"] == 1
    assert len(list(sdk.iter_schedule_history("with-secret"))) == history
    # A changed secret is still sent and taken.
    body["action"]["input"]["pw"] = "apply-secret-changed"
    (folder / "s.json").write_text(json.dumps(body))
    changed, actions = plan_of(almanac("schedules", "apply", str(folder), "-o", "json"))
    assert actions == {"with-secret": "update"} and revisions(sdk)["with-secret"] == 2
