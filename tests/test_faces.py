"""The two faces stand side by side: the console imports nothing from the API and the API nothing
from the console; what both need (paging, errors, time formatting) lives below them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
FACES = {"app.api": "app.console", "app.console": "app.api"}


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth, with `from app import x` read as `app.x`."""
    package = "app." + ".".join(path.relative_to(APP).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.rstrip(".").split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _crosses(module: str, other: str) -> bool:
    return module == other or module.startswith(other + ".")


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_imports_nothing_from_the_other(face):
    other = FACES[face]
    modules = sorted((APP / face.split(".")[1]).rglob("*.py"))
    assert len(modules) > 5, modules
    crossings = {
        f"{path.relative_to(APP.parent)} imports {name}"
        for path in modules
        for name in imported_modules(path)
        if _crosses(name, other)
    }
    assert not crossings, sorted(crossings)


def test_the_import_reader_sees_every_spelling(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.test_faces.APP", tmp_path)
    (tmp_path / "console").mkdir()
    sample = tmp_path / "console" / "views.py"
    sample.write_text(
        "import app.api.routing\n"
        "from app import api\n"
        "from ..api import errors\n"
        "def late():\n"
        "    from app.api.cursors import encode_cursor\n"
    )
    found = imported_modules(sample)
    assert {"app.api.routing", "app.api", "app.api.errors", "app.api.cursors"} <= found
    assert all(_crosses(name, "app.api") for name in found - {"app", "app.console"})
