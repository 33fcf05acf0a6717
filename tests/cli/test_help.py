"""A `flask` command asked only for its help prints it and writes nothing: `users --help` with no
database URL set created `instance/almanac.db` (empty), `instance/secret_key` and
`instance/encryption_key`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.live import ROOT

# The real `flask` command line, with the app's folder (where `instance/` lives) moved to a
# folder of the test's own, so the checkout's instance/ is left alone.
FLASK = """
import pathlib, sys
import app
app.ROOT = pathlib.Path(sys.argv[1])
from flask.cli import main
sys.argv = ["flask", "--app", "wsgi", *sys.argv[2:]]
main()
"""


def _flask(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALMANAC_", "FLASK_"))}
    return subprocess.run(
        [sys.executable, "-c", FLASK, str(home), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_creates_no_instance_folder_keys_or_database(tmp_path):
    for args in (("users", "--help"), ("--help",), ("run", "--help"), ("db", "upgrade", "--help")):
        done = _flask(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Usage: flask"), done.stdout
        assert list(tmp_path.iterdir()) == [], args
    # The same command line that runs a command still creates them on first use.
    done = _flask(tmp_path, "routes")
    assert done.returncode == 0, done.stderr
    created = {path.name for path in (tmp_path / "instance").iterdir()}
    assert created == {"almanac.db", "secret_key", "encryption_key"}


def test_help_after_a_first_start_leaves_the_keys_as_they_were(tmp_path):
    assert _flask(tmp_path, "routes").returncode == 0
    instance = tmp_path / "instance"
    (instance / "almanac.db").unlink()
    keys = {name: (instance / name).read_text() for name in ("secret_key", "encryption_key")}
    done = _flask(tmp_path, "users", "--help")
    assert done.returncode == 0 and "Usage: flask users" in done.stdout, done.stderr
    assert {path.name for path in instance.iterdir()} == set(keys)
    assert {name: (instance / name).read_text() for name in keys} == keys
