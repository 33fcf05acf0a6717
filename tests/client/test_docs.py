"""Every fenced example of docs/cli.md and docs/sdk.md runs against a live server.

`sh` blocks run in order in one folder with the real `almanac` command; `python` blocks run in
order as one program. `text` blocks are illustrations and are not run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from almanac import Client
from tests.live import ROOT

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
BIN = Path(sys.executable).parent


def blocks(name: str, language: str) -> list[str]:
    text = (ROOT / "docs" / name).read_text()
    return [body for lang, body in FENCE.findall(text) if lang == language]


def test_the_docs_have_examples_in_runnable_languages_only():
    for name in ("cli.md", "sdk.md"):
        languages = {lang for lang, _ in FENCE.findall((ROOT / "docs" / name).read_text())}
        assert languages <= {"sh", "python", "text"}, (name, languages)
    assert len(blocks("cli.md", "sh")) >= 8 and len(blocks("sdk.md", "python")) >= 8


@pytest.fixture
def doc_env(live, namespace, tmp_path):
    return {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")} | {
        "ALMANAC_URL": live.url,
        "ALMANAC_TOKEN": live.token,
        "ALMANAC_NAMESPACE": namespace,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "80",
    }


# The examples check the documentation, not the database (every command runs on both databases
# in the other client tests), and each one starts a process: once, on SQLite, keeps the suite quick.
def shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("live", ["sqlite"], indirect=True)
def test_every_cli_example_runs(doc_env, tmp_path, live):
    outputs = []
    workers = Client(live.url, live.token)
    for block in blocks("cli.md", "sh"):
        # The test server runs no workers. On a real one, runs go on between commands: blocks that
        # touch runs take a command per line, with steps worked off after each.
        steps = block.splitlines() if "almanac runs " in block else [block]
        for script in steps:
            run = shell(script, tmp_path, doc_env)
            assert run.returncode == 0, (script, run.stdout, run.stderr)
            outputs.append(run)
            if len(steps) > 1:
                workers.tick(work=True)
    workers.close()
    finished = shell("almanac runs cancel manual-2026-01-05", tmp_path, doc_env)
    assert finished.returncode == 1 and finished.stderr.startswith("error CONFLICT")
    text = "\n".join(r.stdout + r.stderr for r in outputs)
    assert "signed in as admin (superuser)" in text
    assert "error SCHEDULE_REVISION: " in text and "(current revision: 3)" in text
    assert "exit code 1" in text
    assert "More events available (--after-sequence 2)" in text
    assert "unchanged  hourly-report" in text and "unchanged  weekly-digest" in text
    assert (tmp_path / "config" / "almanac" / "profiles.toml").stat().st_mode & 0o777 == 0o600


def test_every_sdk_example_runs(doc_env, monkeypatch):
    for key, value in doc_env.items():
        monkeypatch.setenv(key, value)
    program = "\n".join(blocks("sdk.md", "python"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(program, "docs/sdk.md", "exec"), {"__name__": "__main__"})  # noqa: S102
    text = printed.getvalue()
    assert "someone changed it; now at revision" in text
    assert "404 NOT_FOUND" in text
    assert "100%" in text
    assert "SchedulePaused" in text
