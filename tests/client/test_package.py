"""The client package on its own: no server code, installable, profiles, exit 2, retries."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from almanac import AsyncClient, CapacityExceeded, Client
from almanac.cli import cli
from tests.client.conftest import JsonHandler, serving
from tests.live import ROOT, free_port

BIN = Path(sys.executable).parent


def test_the_client_imports_nothing_from_the_server():
    offenders = []
    for path in sorted((ROOT / "almanac").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in {"app", "tests"}]
    assert offenders == []


def test_pyproject_packages_only_the_client_with_its_command():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"almanac": "almanac.cli:main"}
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["almanac*"]
    names = {
        d.split(">")[0].split("=")[0].split("<")[0] for d in project["project"]["dependencies"]
    }
    assert names == {"httpx", "click"}


def test_the_installed_command_answers_help_and_version():
    help_run = subprocess.run([str(BIN / "almanac"), "--help"], capture_output=True, text=True)
    assert help_run.returncode == 0
    assert "schedules" in help_run.stdout and "Exit codes" in help_run.stdout
    version = subprocess.run([str(BIN / "almanac"), "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == "almanac, version 0.1.0"


def test_a_closed_port_exits_2_with_a_connection_error():
    url = f"http://127.0.0.1:{free_port()}"
    run = subprocess.run(
        [str(BIN / "almanac"), "schedules", "list", "--url", url, "--token", "t"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error CONNECTION: cannot reach " + url)
    assert run.stdout == ""


def test_no_server_configured_is_a_usage_error(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_PROFILE": None}
    result = CliRunner().invoke(cli, ["schedules", "list"], env=env)
    assert result.exit_code == 2
    assert "no server" in result.stderr


def test_auth_setup_writes_a_0600_profile_that_commands_use(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    args = ["auth", "setup", "--url", "http://127.0.0.1:9", "--token", "tok-secret"]
    first = CliRunner().invoke(cli, [*args, "--namespace", "billing"], env=env)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(cli, [*args, "--profile", "ci"], env=env)
    assert second.exit_code == 0
    path = tmp_path / "almanac" / "profiles.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    profiles = tomllib.loads(path.read_text())
    assert profiles["default"] == {
        "url": "http://127.0.0.1:9",
        "token": "tok-secret",
        "namespace": "billing",
    }
    assert profiles["ci"]["namespace"] == "default"
    # The profile is used when neither flags nor environment say otherwise: port 9 is closed.
    used = CliRunner().invoke(cli, ["schedules", "list"], env=env)
    assert used.exit_code == 2
    assert "cannot reach http://127.0.0.1:9" in used.stderr
    missing = CliRunner().invoke(cli, ["schedules", "list", "--profile", "nope"], env=env)
    assert missing.exit_code == 2 and "no profile 'nope'" in missing.stderr


class Stub(JsonHandler):
    """Answers 429 with Retry-After: 1 to the first request, then 200; records what it saw."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        Stub.seen.append(dict(self.headers))
        if len(Stub.seen) == 1:
            full = {"error": {"code": "CAPACITY", "message": "full"}}
            self.send_json(429, full, {"Retry-After": "1"})
        else:
            self.send_json(200, {"username": "stub", "superuser": False, "namespaces": []})


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.seen = []
    with serving(Stub) as url:
        yield url


def test_a_429_with_retry_after_is_retried_once_then_succeeds(stub, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("almanac.transport.time.sleep", waits.append)
    with Client(stub, "secret-token") as client:
        assert client.me().username == "stub"
    assert waits == [1.0]
    assert len(Stub.seen) == 2
    assert Stub.seen[1]["Authorization"] == "Bearer secret-token"
    assert Stub.seen[1]["X-Almanac-Source"] == "sdk"


def test_the_async_client_retries_the_same_way(stub, monkeypatch):
    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr("almanac.aio.asyncio.sleep", record)

    async def main() -> str:
        async with AsyncClient(stub, "t") as client:
            return (await client.me()).username

    assert asyncio.run(main()) == "stub"
    assert waits == [1.0] and len(Stub.seen) == 2


def test_with_no_retries_left_the_429_is_a_capacity_error(stub):
    with Client(stub, "t", retries=0) as client, pytest.raises(CapacityExceeded) as caught:
        client.me()
    assert caught.value.status == 429 and caught.value.code == "CAPACITY"


def test_the_token_never_shows_in_a_repr():
    client = Client("http://127.0.0.1:9", "very-secret-token", "ns")
    assert "very-secret-token" not in repr(client)
    assert "very-secret-token" not in repr(client.schedule("x"))
    client.close()


def test_the_backfill_splitter_halves_refused_parts_and_keeps_time_order():
    from datetime import timedelta

    from almanac.backfill import RangeSplitter, to_datetime
    from almanac.errors import ValidationError

    # A "server" that refuses any part longer than 6 hours, as the 1000-occurrence cap would.
    splitter = RangeSplitter("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")
    sent, fractions = [], []
    while (part := splitter.next_part()) is not None:
        start, end = part
        if end - start > timedelta(hours=6):
            splitter.refused(ValidationError("BACKFILL_TOO_LARGE", "split it", {}, 422))
            continue
        sent.append((start.hour, end.hour))
        splitter.accepted({"results": [{"outcome": "backfilled"}], "started": 1, "skipped": 0})
        fractions.append(splitter.fraction)
    assert sent == [(0, 6), (6, 12), (12, 18), (18, 0)]
    assert fractions == [0.25, 0.5, 0.75, 1.0]
    summary = splitter.summary()
    # 7 requests: the whole day and both halves refused, then four quarters accepted.
    assert (summary.started, summary.requests, len(summary.results)) == (4, 7, 4)
    other = RangeSplitter("2026-01-01T00:00:00Z", to_datetime("2026-01-02T00:00:00+00:00"))
    with pytest.raises(ValidationError):
        other.refused(ValidationError("VALIDATION", "to must be after from", {}, 422))


def test_retry_delays_follow_retry_after_else_back_off_exponentially():
    import email.utils
    from datetime import UTC, datetime, timedelta

    import httpx

    from almanac.transport import retry_delay

    def busy(**headers: str) -> httpx.Response:
        return httpx.Response(503, headers=headers)

    assert retry_delay(busy(**{"Retry-After": "2"}), 0) == 2.0
    assert retry_delay(busy(**{"Retry-After": "3600"}), 0) == 60.0  # capped
    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_delay(busy(**{"Retry-After": soon}), 0) <= 30
    assert [retry_delay(busy(), attempt) for attempt in range(3)] == [0.5, 1.0, 2.0]


def test_auth_setup_writes_any_unicode_as_valid_toml_and_refuses_what_toml_cannot_hold(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    args = ["auth", "setup", "--url", "http://127.0.0.1:9", "--token", 'tok"en\\']
    namespace = 'ns😀é "quoted" back\\slash\ttab\x01'
    written = CliRunner().invoke(cli, [*args, "--namespace", namespace, "--profile", "ü"], env=env)
    assert written.exit_code == 0, written.output
    path = tmp_path / "almanac" / "profiles.toml"
    assert "ns😀é" in path.read_text(encoding="utf-8")
    assert tomllib.loads(path.read_text(encoding="utf-8"))["ü"] == {
        "url": "http://127.0.0.1:9",
        "token": 'tok"en\\',
        "namespace": namespace,
    }
    used = CliRunner().invoke(cli, ["schedules", "list", "--profile", "ü"], env=env)
    assert used.exit_code == 2 and "cannot reach http://127.0.0.1:9" in used.stderr
    refused = CliRunner().invoke(cli, [*args, "--namespace", "ns\udcff", "--profile", "ü"], env=env)
    assert refused.exit_code == 2 and "is not valid Unicode text" in refused.stderr
    assert tomllib.loads(path.read_text(encoding="utf-8"))["ü"]["namespace"] == namespace


def test_auth_setup_refuses_a_token_or_url_no_command_could_use(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    for url, token, said in (
        ("http://127.0.0.1:9", "été", "the token must be printable ASCII text"),
        ("http://[::1", "tok", "not a valid URL"),
    ):
        result = CliRunner().invoke(cli, ["auth", "setup", "--url", url, "--token", token], env=env)
        assert result.exit_code == 2 and said in result.stderr, result.output
    assert not (tmp_path / "almanac" / "profiles.toml").exists()


def test_auth_setup_reads_the_environment_like_every_command(tmp_path):
    """ALMANAC_PROFILE=ci wrote the `default` profile (overwriting it), and ALMANAC_URL and
    ALMANAC_TOKEN were ignored ("Missing option '--token'")."""
    path = tmp_path / "almanac" / "profiles.toml"
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    first = ["auth", "setup", "--url", "http://127.0.0.1:9", "--token", "t1"]
    assert CliRunner().invoke(cli, first, env=env).exit_code == 0
    env |= {
        "ALMANAC_PROFILE": "ci",
        "ALMANAC_URL": "http://127.0.0.1:10",
        "ALMANAC_TOKEN": "t2",
        "ALMANAC_NAMESPACE": "billing",
    }
    result = CliRunner().invoke(cli, ["auth", "setup"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"profile 'ci' written to {path}\n"
    assert tomllib.loads(path.read_text()) == {
        "default": {"url": "http://127.0.0.1:9", "token": "t1", "namespace": "default"},
        "ci": {"url": "http://127.0.0.1:10", "token": "t2", "namespace": "billing"},
    }
    refused = CliRunner().invoke(cli, ["auth", "setup", "-n", "a/b"], env=env)
    assert refused.exit_code == 2 and "'a/b'" in refused.stderr, refused.output
    assert tomllib.loads(path.read_text())["ci"]["namespace"] == "billing"


def test_auth_setup_takes_output_like_every_command_and_never_prints_the_token(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    args = ["auth", "setup", "--url", "http://127.0.0.1:9", "--token", "tok-secret", "-n", "ops"]
    path = str(tmp_path / "almanac" / "profiles.toml")
    result = CliRunner().invoke(cli, [*args, "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "profile": "default",
        "path": path,
        "url": "http://127.0.0.1:9",
        "namespace": "ops",
    }
    line = CliRunner().invoke(cli, [*args, "--output", "jsonl", "--profile", "ci"], env=env)
    assert json.loads(line.stdout)["profile"] == "ci" and line.stdout.count("\n") == 1
    table = CliRunner().invoke(cli, args, env=env)
    assert table.stdout == f"profile 'default' written to {path}\n"
    assert "tok-secret" not in result.stdout + line.stdout + table.stdout


def test_a_profile_value_of_the_wrong_type_is_a_usage_error_naming_file_profile_and_key(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    path = tmp_path / "almanac" / "profiles.toml"
    path.parent.mkdir()
    for text, said in (
        ("[default]\nurl = 5\n", "profile 'default': url is not a string"),
        (
            '[default]\nurl = "http://127.0.0.1:9"\ntoken = 5\n',
            "profile 'default': token is not a string",
        ),
        ('[default]\nurl = ["x"]\n', "profile 'default': url is not a string"),
        ('default = "x"\n', "profile 'default' is not a table"),
    ):
        path.write_text(text)
        result = CliRunner().invoke(cli, ["schedules", "list"], env=env)
        assert result.exit_code == 2, result.output
        assert f"Error: cannot read {path}: {said}" in result.stderr.splitlines()


def test_a_broken_profile_stops_only_the_commands_that_use_it(tmp_path):
    """Every command checked every profile: one profile with an empty namespace or a number
    for a URL stopped commands run with another, good one."""
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    path = tmp_path / "almanac" / "profiles.toml"
    path.parent.mkdir()
    good = '[ci]\nurl = "http://127.0.0.1:9"\ntoken = "t"\nnamespace = "billing"\n'
    path.write_text(good + '[old]\nurl = 5\nnamespace = ""\n')
    status = CliRunner().invoke(cli, ["auth", "status", "--profile", "ci", "-o", "json"], env=env)
    # It got as far as the (closed) port: the profile was read and used.
    assert status.exit_code == 2 and "cannot reach" in status.stderr, status.output
    assert "cannot read" not in status.stderr
    broken = CliRunner().invoke(cli, ["auth", "status", "--profile", "old"], env=env)
    assert broken.exit_code == 2
    assert f"cannot read {path}: profile 'old': url is not a string" in broken.stderr
    # Rewriting the file keeps every profile, so it still refuses one it cannot keep.
    setup = ["auth", "setup", "--profile", "new", "--url", "http://127.0.0.1:9", "--token", "t"]
    refused = CliRunner().invoke(cli, setup, env=env)
    assert refused.exit_code == 2 and "profile 'old'" in refused.stderr
    assert path.read_text() == good + '[old]\nurl = 5\nnamespace = ""\n'


def test_an_empty_option_or_profile_value_is_a_usage_error_not_the_fallback(tmp_path):
    """`-n "$NS"` with NS unset named no namespace and fell back to the profile's or `default`:
    an `apply --prune` then planned to delete that namespace's schedules. Empty is refused,
    before any request, naming the option (or the profile's key)."""
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    path = tmp_path / "almanac" / "profiles.toml"
    path.parent.mkdir()
    # Port 9 is closed: a command that got as far as a request would say "cannot reach".
    path.write_text('[default]\nurl = "http://127.0.0.1:9"\ntoken = "t"\nnamespace = "billing"\n')
    for flag in ("--namespace", "-n", "--url", "--token", "--profile"):
        for empty in ("", "  "):
            result = CliRunner().invoke(cli, ["auth", "status", flag, empty], env=env)
            assert result.exit_code == 2, (flag, result.output)
            name = "--namespace" if flag == "-n" else flag
            assert f"{name} is empty" in result.stderr and "cannot reach" not in result.stderr
    setup = ["auth", "setup", "--url", "http://127.0.0.1:9", "--token", "t", "-n", ""]
    refused = CliRunner().invoke(cli, setup, env=env)
    assert refused.exit_code == 2 and "--namespace is empty" in refused.stderr
    assert "billing" in path.read_text()
    path.write_text('[default]\nurl = "http://127.0.0.1:9"\ntoken = "t"\nnamespace = ""\n')
    result = CliRunner().invoke(cli, ["auth", "status"], env=env)
    assert result.exit_code == 2, result.output
    assert f"cannot read {path}: profile 'default': namespace is empty" in result.stderr


def test_a_profile_file_that_is_not_utf8_is_a_usage_error(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    path = tmp_path / "almanac" / "profiles.toml"
    path.parent.mkdir()
    path.write_bytes(b"\xff\xfe[default]\n")
    result = CliRunner().invoke(cli, ["schedules", "list"], env=env)
    assert result.exit_code == 2, result.output
    assert f"Error: cannot read {path}: it is not UTF-8 text" in result.stderr.splitlines()


def test_a_profiles_file_nested_too_deeply_is_a_usage_error_naming_it(tmp_path):
    path = tmp_path / "almanac" / "profiles.toml"
    path.parent.mkdir()
    path.write_text("[default]\nx = " + "[" * 5_000 + "]" * 5_000 + "\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_URL": None, "ALMANAC_TOKEN": None}
    result = CliRunner().invoke(cli, ["auth", "status"], env=env)
    assert result.exit_code == 2, result.output
    assert f"cannot read {path}: it nests too deeply" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_result_type_the_docs_name_imports_from_the_package():
    """docs/sdk.md names the nested result types beside the others; `from almanac import
    TickResult` raised ImportError while they lived in `almanac.models` alone."""
    import almanac
    from almanac import models

    results = {
        name
        for name, value in vars(models).items()
        if isinstance(value, type) and issubclass(value, models.Resource)
        and value is not models.Resource
    }  # fmt: skip
    assert results <= set(almanac.__all__), sorted(results - set(almanac.__all__))
    assert len(almanac.__all__) == len(set(almanac.__all__))
    for name in almanac.__all__:
        assert getattr(almanac, name) is not None
    documented = (ROOT / "docs" / "sdk.md").read_text()
    for name in ("PreviewOccurrence", "TickResult", "TickRow", "TickFailure", "VersionSummary"):
        assert f"`{name}`" in documented
        assert getattr(almanac, name) is getattr(models, name)


def test_output_that_cannot_be_written_is_one_line_and_exit_4_not_a_traceback(tmp_path):
    """`almanac ... > /dev/full` printed a Python traceback and exited 1 (an API error)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    args = [str(BIN / "almanac"), "auth", "setup", "--url", "http://127.0.0.1:9", "--token", "t"]
    with open("/dev/full", "w") as full:
        done = subprocess.run([*args, "-o", "json"], env=env, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 4, done.stderr
    assert done.stderr.decode() == (
        "error OUTPUT: cannot write the output: No space left on device\n"
    )
