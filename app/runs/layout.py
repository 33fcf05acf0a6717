"""Where every step of a definition lives: its sequence (root or branch) and its index there.

A run executes sequences of steps: the root sequence (the definition's `steps`) and one per
started branch of a parallel step. A sequence is named by its path: "" for the root, and
`parallel_id/branch_id` pairs joined by "/" for branches (ids never contain "/"). Step ids are
unique across the whole definition, so a node id names exactly one step, in exactly one sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.db.runs import Run, WorkflowVersion

ROOT = ""


@dataclass(frozen=True)
class Node:
    step: dict[str, Any]
    path: str
    index: int


@dataclass
class Layout:
    nodes: dict[str, Node] = field(default_factory=dict)
    sequences: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    has_parallel: bool = False

    def step(self, path: str, index: int) -> dict[str, Any] | None:
        """The step at `index` of sequence `path`, or None past its end."""
        steps = self.sequences[path]
        return steps[index] if 0 <= index < len(steps) else None


def join(path: str, parallel_id: str, branch_id: str) -> str:
    segment = f"{parallel_id}/{branch_id}"
    return f"{path}/{segment}" if path else segment


def parent_of(path: str) -> str:
    """The path of the sequence holding the parallel step that `path` is a branch of."""
    return "/".join(path.split("/")[:-2])


def branch_path(path: str) -> list[str]:
    """`"a/x/b/y"` as the history shows it: `["a/x", "b/y"]` (empty at the root)."""
    if not path:
        return []
    parts = path.split("/")
    return [f"{parts[i]}/{parts[i + 1]}" for i in range(0, len(parts), 2)]


def path_from(segments: list[str] | None) -> str:
    return "/".join(segments or [])


def build(definition: dict[str, Any]) -> Layout:
    layout = Layout()
    _walk(layout, definition["steps"], ROOT)
    return layout


def _walk(layout: Layout, steps: list[dict[str, Any]], path: str) -> None:
    layout.sequences[path] = steps
    for index, step in enumerate(steps):
        layout.nodes[step["id"]] = Node(step, path, index)
        if step["type"] == "parallel":
            layout.has_parallel = True
            for branch in step["branches"]:
                _walk(layout, branch["steps"], join(path, step["id"], branch["id"]))


# Definitions are immutable and cached per engine; their layouts are cached beside them.
_LAYOUTS: dict[int, tuple[dict[str, Any], Layout]] = {}


def layout_of(definition: dict[str, Any]) -> Layout:
    cached = _LAYOUTS.get(id(definition))
    if cached is None or cached[0] is not definition:
        cached = (definition, build(definition))
        _LAYOUTS[id(definition)] = cached
    return cached[1]


def capacity(step: dict[str, Any]) -> int:
    """How many branches of a parallel step may be active at once (default: all)."""
    return int(step.get("max_concurrency") or len(step["branches"]))


# Versions are immutable, so their definitions are cached per engine (one database each).
_DEFINITIONS: WeakKeyDictionary[Engine, dict[int, dict[str, Any]]] = WeakKeyDictionary()


def definition_of(session: Session, run: Run) -> dict[str, Any]:
    """The run's workflow definition (immutable once deployed)."""
    cache = _DEFINITIONS.setdefault(session.get_bind().engine, {})
    definition = cache.get(run.workflow_version_id)
    if definition is None:
        version = session.get(WorkflowVersion, run.workflow_version_id)
        assert version is not None
        definition = cache.setdefault(run.workflow_version_id, version.definition)
    return definition


def layout_for(session: Session, run: Run) -> Layout:
    return layout_of(definition_of(session, run))
