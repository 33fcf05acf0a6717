"""The longest branch path a definition deploy accepts fits its column, so such a run starts."""

from __future__ import annotations

from app.db.runs import RunBranch
from app.runs.definitions import MAX_ID_LENGTH, MAX_PARALLEL_DEPTH, longest_branch_path

LENGTH = 128


def _id(letter: str, number: int) -> str:
    return (letter * LENGTH)[: LENGTH - 2] + f"{number:02d}"


def _deepest_longest() -> list[dict]:
    """Parallel steps nested as deep as allowed, every step and branch id as long as allowed."""
    step: dict = {"id": _id("l", 0), "type": "action", "action": "noop"}
    for level in range(MAX_PARALLEL_DEPTH):
        branch = {"id": _id("b", level), "steps": [step]}
        step = {"id": _id("p", level), "type": "parallel", "branches": [branch]}
    return [step, {"id": _id("z", 9), "type": "action", "action": "noop"}]


def test_the_longest_branch_path_fits_its_column():
    assert MAX_ID_LENGTH == LENGTH
    assert longest_branch_path() == MAX_PARALLEL_DEPTH * (2 * LENGTH + 1) + MAX_PARALLEL_DEPTH - 1
    assert RunBranch.__table__.c.path.type.length >= longest_branch_path()


def test_a_run_with_the_longest_branch_paths_completes_and_others_run_beside_it(scenario):
    scenario.deploy("longids", _deepest_longest())
    scenario.deploy("plain", [{"id": "a", "type": "action", "action": "noop"}])
    deep = scenario.start("longids")["run_id"]
    plain = scenario.start("plain")["run_id"]
    result = scenario.tick()
    assert result.failures == []
    assert scenario.run(deep)["status"] == "completed"
    assert scenario.run(plain)["status"] == "completed"
    # The deepest action's events carry the whole path: one pair per level.
    deepest = [e for e in scenario.events(deep) if len(e.get("branch_path", [])) == 4]
    assert deepest and len("/".join(deepest[0]["branch_path"])) == longest_branch_path()
