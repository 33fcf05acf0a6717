"""Long-running processes tune the garbage collector once loaded; short commands keep Python's
defaults (docs/operations.md, "Memory and the garbage collector")."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

from app import heap
from tests.live import ROOT

# What a process reports of its collector once the app is built.
PROBE = """
import gc, json, sys
sys.path.insert(0, {root!r})
from app import create_app
create_app()
print(json.dumps({{"threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}}))
"""


def _collector_after_start(tmp_path: Path, folder: str) -> dict[str, int]:
    """Build the app in a fresh interpreter whose script lives in `folder` (a serving process is
    recognised by its program's name or folder, as gunicorn's is)."""
    script = tmp_path / folder / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE.format(root=str(ROOT)))
    env = {
        **os.environ,
        "ALMANAC_DATABASE_URL": f"sqlite:///{tmp_path / 'probe.db'}",
        "ALMANAC_SECRET_KEY": "probe",
        "ALMANAC_SCHEDULER": "off",
    }
    env.pop("FLASK_RUN_FROM_CLI", None)
    if folder == "gunicorn":
        # A serving process checks the schema before anything else: give it a migrated one.
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_serving_process_freezes_its_startup_heap_and_collects_the_young_less_often(
    tmp_path: Path,
) -> None:
    found = _collector_after_start(tmp_path, "gunicorn")
    assert found["threshold"] == heap.YOUNG_THRESHOLD
    # Everything startup loaded is out of the collector's walks.
    assert found["frozen"] > 10_000


def test_any_other_process_keeps_pythons_defaults(tmp_path: Path) -> None:
    found = _collector_after_start(tmp_path, "scripts")
    assert found == {"threshold": 700, "frozen": 0}


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_settle_frees_startup_garbage_before_freezing_the_rest() -> None:
    before = gc.get_threshold()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    kept = _Node()
    del a, b
    try:
        heap.settle()
        # A cycle left by startup is freed, not frozen for the life of the process.
        assert gone() is None
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD
        assert kept.other is None
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
