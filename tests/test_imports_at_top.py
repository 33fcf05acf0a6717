"""Imports in app/ sit at the top of their module, where a reader and an import cycle show.

An import inside a function hides a circle between modules instead of removing it; the layers
(docs/schedules.md has the schedules' module map) are meant to import one way only. The firing
decisions must stay pure so a simulation can run them without a database.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
# (module path under app/, function name) -> why its import cannot sit at the top. Keep it short:
# only a heavy dependency that really must load late, with the reason next to it.
ALLOWED: dict[tuple[str, str], str] = {
    ("app/__init__.py", "create_app"): (
        "the factory loads the web stack; at the package's top it would load with every "
        "`import app.calendar` (2.5 s and 96 MB instead of 0.5 s and 32 MB)"
    ),
}
# What the pure decisions may import: the standard library and the calendar (no I/O).
PURE_PREFIXES = ("app.calendar",)


def function_imports(source: str) -> list[tuple[int, str]]:
    """(line, function name) of every import statement inside a function or lambda body."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            name = getattr(node, "name", "<lambda>")
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found.append((inner.lineno, name))
    return found


def module_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_check_finds_an_import_in_a_function_or_a_method():
    source = (
        "import os\n"
        "def late():\n    import json\n"
        "class C:\n    def method(self):\n        from app import db\n"
    )
    assert function_imports(source) == [(3, "late"), (6, "method")]


def test_no_module_in_app_imports_inside_a_function():
    offenders = []
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP.parent).as_posix()
        for line, function in function_imports(path.read_text()):
            if (relative, function) not in ALLOWED:
                offenders.append(f"{relative}:{line} in {function}()")
    assert offenders == []
    assert len(list(APP.rglob("*.py"))) > 50


def test_every_allowed_late_import_still_exists():
    late = {
        (path.relative_to(APP.parent).as_posix(), function)
        for path in APP.rglob("*.py")
        for _, function in function_imports(path.read_text())
    }
    assert set(ALLOWED) <= late


def test_importing_the_pure_layers_loads_no_database_no_faces_and_no_ticker_host():
    code = (
        "import sys, app.calendar, app.schedules.tick.policy; "
        "print(sorted(m for m in ('sqlalchemy', 'app.api', 'app.console', 'apscheduler') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=APP.parent, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_firing_decisions_import_only_the_standard_library_and_the_calendar():
    imported = module_imports((APP / "schedules" / "tick" / "policy.py").read_text())
    outside = {
        name
        for name in imported
        if name.split(".")[0] not in sys.stdlib_module_names
        and name != "__future__"
        and not name.startswith(PURE_PREFIXES)
    }
    assert "app.calendar" in imported
    assert outside == set()
