"""Workflow definitions (SPEC §6.1): validated once, on deploy, then stored as immutable."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import jsonschema

from app.auth.grants import ROLE_GRANTS
from app.calendar import CalendarError, parse_duration
from app.runs.actions import registered
from app.runs.errors import DefinitionInvalid

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
STEP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_STEPS = 200
MAX_TIMEOUT_SECONDS = 366 * 86400
MAX_ATTEMPTS = 100
ON_TIMEOUT = ("fail", "continue")

TOP_LEVEL_KEYS = {"name", "description", "input_schema", "timeout_seconds", "steps"}
COMMON_KEYS = {"id", "type", "description"}
STEP_KEYS = {
    "action": {"action", "args", "retry"},
    "wait": {"duration"},
    "signal": {"signal", "timeout_seconds", "on_timeout"},
    "task": {"title", "role", "timeout_seconds", "on_timeout"},
}


def validate_definition(definition: Any) -> dict[str, Any]:
    """Return `definition` if it is valid, else raise DefinitionInvalid naming the step."""
    if not isinstance(definition, dict):
        raise DefinitionInvalid([], "a workflow definition must be a JSON object")
    for key in definition:
        if key not in TOP_LEVEL_KEYS:
            raise DefinitionInvalid([key], "unknown field")
    name = definition.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise DefinitionInvalid(
            ["name"], "must be 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
        )
    _check_schema(definition.get("input_schema", {}))
    if "timeout_seconds" in definition:
        _check_seconds(definition["timeout_seconds"], ["timeout_seconds"], None)
    steps = definition.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise DefinitionInvalid(["steps"], f"must be a list of 1 to {MAX_STEPS} steps")
    seen: set[str] = set()
    for index, step in enumerate(steps):
        _check_step(step, index, seen)
    return definition


def _check_schema(schema: Any) -> None:
    if not isinstance(schema, dict | bool):
        raise DefinitionInvalid(["input_schema"], "must be a JSON Schema (an object)")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ["input_schema", *exc.absolute_path]
        raise DefinitionInvalid(where, f"not a valid JSON Schema: {exc.message}") from None


def _check_seconds(value: Any, loc: list[str | int], step: str | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionInvalid(loc, "must be a whole number of seconds", step)
    if not 1 <= value <= MAX_TIMEOUT_SECONDS:
        raise DefinitionInvalid(loc, f"must be from 1 to {MAX_TIMEOUT_SECONDS}", step)


def _check_step(step: Any, index: int, seen: set[str]) -> None:
    loc: list[str | int] = ["steps", index]
    if not isinstance(step, dict):
        raise DefinitionInvalid(loc, "a step must be a JSON object")
    step_id = step.get("id")
    if not isinstance(step_id, str) or not STEP_ID_RE.match(step_id):
        raise DefinitionInvalid(
            [*loc, "id"],
            "must be 1-128 letters, digits, '.', '_', ':' or '-', starting alphanumeric",
        )
    if step_id in seen:
        raise DefinitionInvalid([*loc, "id"], f"duplicate step id {step_id!r}", step_id)
    seen.add(step_id)
    kind = step.get("type")
    if kind not in STEP_KEYS:
        raise DefinitionInvalid(
            [*loc, "type"],
            f"unknown step type {kind!r}; expected one of {', '.join(STEP_KEYS)}",
            step_id,
        )
    for key in step:
        if key not in COMMON_KEYS | STEP_KEYS[kind]:
            article = "an" if kind[:1] in "aeiou" else "a"
            raise DefinitionInvalid(
                [*loc, key], f"unknown field for {article} {kind} step", step_id
            )
    CHECKS[kind](step, loc, step_id)


def _check_action(step: dict[str, Any], loc: list[str | int], step_id: str) -> None:
    name = step.get("action")
    if not isinstance(name, str) or name not in registered():
        known = ", ".join(sorted(registered()))
        raise DefinitionInvalid(
            [*loc, "action"], f"unknown action {name!r}; registered: {known}", step_id
        )
    retry = step.get("retry", {})
    if not isinstance(retry, dict) or set(retry) - {"max_attempts", "backoff_seconds"}:
        raise DefinitionInvalid(
            [*loc, "retry"],
            "must be an object with 'max_attempts' and optionally 'backoff_seconds'",
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
    if not isinstance(name, str) or not STEP_ID_RE.match(name):
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
    if step.get("role") is not None and step["role"] not in ROLE_GRANTS:
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
