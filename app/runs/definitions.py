"""Workflow definitions: validated once, on deploy, then stored as immutable."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from app.auth.grants import ROLE_GRANTS
from app.calendar import CalendarError, parse_duration
from app.runs.actions import registered
from app.runs.errors import DefinitionInvalid
from app.runs.schemas import SCHEMA_DATA, SCHEMA_MAPS, SchemaRefused, check_input_schema

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
STEP_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
MAX_STEPS = 200
MAX_DESCRIPTION = 4096
# Far more than a real input schema needs; bounds the cost of checking one.
MAX_SCHEMA_BYTES = 64 * 1024
MAX_TIMEOUT_SECONDS = 366 * 86400
MAX_ATTEMPTS = 100
ON_TIMEOUT = ("fail", "continue")
ON_STEP_FAILURE = ("fail", "incident")
# Parallel steps nest: a parallel step inside a branch of another is one level deeper.
MAX_PARALLEL_DEPTH = 4
MAX_BRANCHES = 50
# Step and branch ids (STEP_ID_RE).
MAX_ID_LENGTH = 128

TOP_LEVEL_KEYS = {
    "name",
    "description",
    "input_schema",
    "timeout_seconds",
    "on_step_failure",
    "steps",
}
COMMON_KEYS = {"id", "type", "description"}
STEP_KEYS = {
    "action": {"action", "args", "retry"},
    "wait": {"duration"},
    "signal": {"signal", "timeout_seconds", "on_timeout"},
    "task": {"title", "role", "timeout_seconds", "on_timeout"},
    "parallel": {"branches", "max_concurrency"},
}


def validate_definition(definition: Any) -> dict[str, Any]:
    """Return `definition` if it is valid, else raise DefinitionInvalid naming every field and
    top-level step that is wrong (the first mistake of each), so one deploy reports them all."""
    if not isinstance(definition, dict):
        raise DefinitionInvalid([], "a workflow definition must be a JSON object")
    found: list[DefinitionInvalid] = []

    def check(test: Callable[..., None], *args: Any) -> None:
        try:
            test(*args)
        except DefinitionInvalid as exc:
            found.append(exc)

    found.extend(
        DefinitionInvalid([key], "unknown field") for key in definition if key not in TOP_LEVEL_KEYS
    )
    check(_check_name, definition.get("name"))
    check(_check_description, definition, [])
    check(_check_schema, definition.get("input_schema", {}))
    if "timeout_seconds" in definition:
        check(_check_seconds, definition["timeout_seconds"], ["timeout_seconds"], None)
    if definition.get("on_step_failure", "fail") not in ON_STEP_FAILURE:
        found.append(DefinitionInvalid(["on_step_failure"], "must be 'fail' or 'incident'"))
    steps = definition.get("steps")
    if isinstance(steps, list) and 1 <= len(steps) <= MAX_STEPS:
        seen: set[str] = set()
        for index, step in enumerate(steps):
            check(_check_step, step, ["steps", index], seen, 0)
    else:
        check(_check_steps, steps, ["steps"], set(), 0)
    if found:
        raise DefinitionInvalid.combined(found)
    return definition


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise DefinitionInvalid(
            ["name"], "must be 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
        )


def _check_description(item: dict[str, Any], loc: list[str | int]) -> None:
    """A definition's or a step's `description`: absent, null, or text of bounded length."""
    description = item.get("description")
    if description is not None and (
        not isinstance(description, str) or len(description) > MAX_DESCRIPTION
    ):
        msg = f"must be text of at most {MAX_DESCRIPTION} characters"
        raise DefinitionInvalid([*loc, "description"], msg)


def _check_steps(
    steps: Any, loc: list[str | int], seen: set[str], depth: int, owner: str | None = None
) -> None:
    """Check one sequence of steps; `seen` collects step ids across the whole definition.

    `owner` is the parallel step holding the sequence (None at the top): a mistake no step id
    of its own can name, such as a branch's missing steps or a nested step's bad id, names it."""
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise DefinitionInvalid(loc, f"must be a list of 1 to {MAX_STEPS} steps", owner)
    for index, step in enumerate(steps):
        _check_step(step, [*loc, index], seen, depth, owner)


def _check_schema(schema: Any) -> None:
    if not isinstance(schema, dict | bool):
        raise DefinitionInvalid(
            ["input_schema"], "must be a JSON Schema (an object, or true or false)"
        )
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        msg = f"is {size} bytes; an input schema may have at most {MAX_SCHEMA_BYTES}"
        raise DefinitionInvalid(["input_schema"], msg)
    try:
        check_input_schema(schema, ["input_schema"])
    except SchemaRefused as exc:
        raise DefinitionInvalid(exc.loc, exc.msg) from None
    _check_secret_marks(schema, [])


SECRET_MARK_RULE = (
    "a secret is marked on a property reached through 'properties' from the top of the schema "
    "(x-secret or writeOnly on the property itself); a mark inside $ref targets, $defs, items, "
    "allOf, anyOf, oneOf and the like would be ignored and its value stored in plaintext"
)


def _check_secret_marks(
    schema: Any, path: list[str | int], honoured: bool = False, root: bool = True
) -> None:
    """Refuse a secret mark Almanac would not honour: it follows `properties` from the top only.

    Walks schemas knowing what each node is (a schema, a map of names to schemas, or data), so
    a `$defs` entry named like a keyword is still a schema. `honoured`: this schema is a
    property reached through `properties` from the top."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            _check_secret_marks(item, [*path, index], False, False)
        return
    if not isinstance(schema, dict):
        return
    marked = schema.get("x-secret") is True or schema.get("writeOnly") is True
    if marked and (root or not honoured):
        raise DefinitionInvalid(["input_schema", *path], SECRET_MARK_RULE)
    for key, item in schema.items():
        if key in SCHEMA_DATA:
            continue
        if key in SCHEMA_MAPS and isinstance(item, dict):
            # Entries of a map are schemas; only those of a followed `properties` are honoured.
            follows = key == "properties" and (root or honoured)
            for name, entry in item.items():
                _check_secret_marks(entry, [*path, key, name], follows, False)
        else:
            _check_secret_marks(item, [*path, key], False, False)


def _check_seconds(value: Any, loc: list[str | int], step: str | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionInvalid(loc, "must be a whole number of seconds", step)
    if not 1 <= value <= MAX_TIMEOUT_SECONDS:
        raise DefinitionInvalid(loc, f"must be from 1 to {MAX_TIMEOUT_SECONDS}", step)


def _check_step(
    step: Any, loc: list[str | int], seen: set[str], depth: int, owner: str | None = None
) -> None:
    if not isinstance(step, dict):
        raise DefinitionInvalid(loc, "a step must be a JSON object", owner)
    step_id = step.get("id")
    if not isinstance(step_id, str) or not STEP_ID_RE.fullmatch(step_id):
        raise DefinitionInvalid(
            [*loc, "id"],
            "must be 1-128 letters, digits, '.', '_', ':' or '-', starting alphanumeric",
            owner,
        )
    if step_id in seen:
        raise DefinitionInvalid([*loc, "id"], f"duplicate step id {step_id!r}", step_id)
    seen.add(step_id)
    kind = step.get("type")
    if not isinstance(kind, str) or kind not in STEP_KEYS:
        known = ", ".join(STEP_KEYS)
        msg = f"unknown step type {kind!r}; expected one of {known}"
        if kind is None:
            msg = f"is required: one of {known}"
        raise DefinitionInvalid([*loc, "type"], msg, step_id)
    for key in step:
        if key not in COMMON_KEYS | STEP_KEYS[kind]:
            article = "an" if kind[:1] in "aeiou" else "a"
            raise DefinitionInvalid(
                [*loc, key], f"unknown field for {article} {kind} step", step_id
            )
    _check_description(step, loc)
    if kind == "parallel":
        _check_parallel(step, loc, step_id, seen, depth + 1)
    else:
        CHECKS[kind](step, loc, step_id)


def longest_branch_path() -> int:
    """The longest `run_branches.path` a definition can make: one `parallel_id/branch_id` pair
    per level of nesting, joined by '/' (`layout.join`); the column is at least this long."""
    return MAX_PARALLEL_DEPTH * (2 * MAX_ID_LENGTH + 1) + MAX_PARALLEL_DEPTH - 1


def _check_parallel(
    step: dict[str, Any], loc: list[str | int], step_id: str, seen: set[str], depth: int
) -> None:
    if depth > MAX_PARALLEL_DEPTH:
        raise DefinitionInvalid(
            loc, f"parallel steps nest at most {MAX_PARALLEL_DEPTH} deep; this is {depth}", step_id
        )
    branches = step.get("branches")
    if not isinstance(branches, list) or not 1 <= len(branches) <= MAX_BRANCHES:
        raise DefinitionInvalid(
            [*loc, "branches"], f"must be a list of 1 to {MAX_BRANCHES} branches", step_id
        )
    capacity = step.get("max_concurrency", len(branches))
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise DefinitionInvalid(
            [*loc, "max_concurrency"], "must be a whole number of at least 1", step_id
        )
    branch_ids: set[str] = set()
    for index, branch in enumerate(branches):
        where: list[str | int] = [*loc, "branches", index]
        if not isinstance(branch, dict):
            raise DefinitionInvalid(where, "a branch is an object with 'id' and 'steps'", step_id)
        unknown = sorted(set(branch) - {"id", "steps"})
        if unknown:
            # The key itself is named, as a step's own unknown fields are.
            raise DefinitionInvalid(
                [*where, unknown[0]],
                "unknown field for a branch (it has 'id' and 'steps')",
                step_id,
            )
        branch_id = branch.get("id")
        if not isinstance(branch_id, str) or not STEP_ID_RE.fullmatch(branch_id):
            raise DefinitionInvalid(
                [*where, "id"],
                "must be 1-128 letters, digits, '.', '_', ':' or '-', starting alphanumeric",
                step_id,
            )
        if branch_id in branch_ids:
            raise DefinitionInvalid([*where, "id"], f"duplicate branch id {branch_id!r}", step_id)
        branch_ids.add(branch_id)
        _check_steps(branch.get("steps"), [*where, "steps"], seen, depth, step_id)


def _check_action(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    name = step.get("action")
    if not isinstance(name, str) or name not in registered():
        known = ", ".join(sorted(registered()))
        msg = f"unknown action {name!r}; registered: {known}"
        if name is None:
            msg = f"is required: the name of a registered action ({known})"
        raise DefinitionInvalid([*loc, "action"], msg, step_id)
    retry = step.get("retry", {})
    if not isinstance(retry, dict):
        raise DefinitionInvalid(
            [*loc, "retry"],
            "must be an object with 'max_attempts' and optionally 'backoff_seconds'",
            step_id,
        )
    unknown = sorted(set(retry) - {"max_attempts", "backoff_seconds"})
    if unknown:
        raise DefinitionInvalid(
            [*loc, "retry", unknown[0]],
            "unknown field for a retry policy (it has 'max_attempts' and 'backoff_seconds')",
            step_id,
        )
    attempts = retry.get("max_attempts", 1)
    if (
        isinstance(attempts, bool)
        or not isinstance(attempts, int)
        or not (1 <= attempts <= MAX_ATTEMPTS)
    ):
        raise DefinitionInvalid(
            [*loc, "retry", "max_attempts"], f"must be an integer from 1 to {MAX_ATTEMPTS}", step_id
        )
    backoff = retry.get("backoff_seconds", 0)
    if (
        isinstance(backoff, bool)
        or not isinstance(backoff, int | float)
        or not (0 <= backoff <= 86400)
    ):
        raise DefinitionInvalid(
            [*loc, "retry", "backoff_seconds"],
            "must be a number of seconds from 0 to 86400",
            step_id,
        )


def _check_wait(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    try:
        duration = parse_duration(step.get("duration"), ())  # type: ignore[arg-type]
    except CalendarError as exc:
        raise DefinitionInvalid([*loc, "duration"], exc.msg, step_id) from None
    if not timedelta(seconds=1) <= duration <= timedelta(seconds=MAX_TIMEOUT_SECONDS):
        raise DefinitionInvalid([*loc, "duration"], "must be from PT1S to P366D", step_id)


def _check_deadline(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    if "timeout_seconds" in step:
        _check_seconds(step["timeout_seconds"], [*loc, "timeout_seconds"], step_id)
    if step.get("on_timeout", "fail") not in ON_TIMEOUT:
        raise DefinitionInvalid([*loc, "on_timeout"], "must be 'fail' or 'continue'", step_id)


def _check_signal(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    name = step.get("signal")
    if not isinstance(name, str) or not STEP_ID_RE.fullmatch(name):
        raise DefinitionInvalid(
            [*loc, "signal"],
            "must be a signal name of 1-128 letters, digits, '.', '_', ':' or '-'",
            step_id,
        )
    _check_deadline(step, loc, step_id)


def _check_task(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    title = step.get("title")
    if not isinstance(title, str) or not 1 <= len(title) <= 256:
        raise DefinitionInvalid([*loc, "title"], "must be a string of 1-256 characters", step_id)
    role = step.get("role")
    if role is not None and (not isinstance(role, str) or role not in ROLE_GRANTS):
        raise DefinitionInvalid([*loc, "role"], f"must be one of {', '.join(ROLE_GRANTS)}", step_id)
    _check_deadline(step, loc, step_id)


CHECKS: dict[str, Callable[[dict[str, Any], list[str | int], str], None]] = {
    "action": _check_action,
    "wait": _check_wait,
    "signal": _check_signal,
    "task": _check_task,
}


def step_at(definition: dict[str, Any], index: int) -> dict[str, Any] | None:
    """The step at `index`, or None past the end."""
    steps = definition["steps"]
    return steps[index] if 0 <= index < len(steps) else None


def wait_duration(step: dict[str, Any]) -> timedelta:
    return parse_duration(step["duration"])
