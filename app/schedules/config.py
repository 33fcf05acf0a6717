"""A schedule's configuration: request parsing with the shorthands, and merge patches.

`parse_request` is the one place a request (API body, console form, patched config) becomes a
normalized `ScheduleConfig`; it raises ValidationFailed (422 VALIDATION) or CalendarError
(422 CALENDAR_INVALID) naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from app.calendar import CalendarError, Spec
from app.calendar.jitter import MAX_JITTER_SECONDS
from app.inputs import json_size
from app.schedules.errors import invalid

OVERLAP_POLICIES = (
    "skip",
    "buffer_one",
    "buffer_all",
    "allow_all",
    "cancel_other",
    "terminate_other",
)
MISSED_POLICIES = ("skip", "fire_once")
# Not dots alone: `.` and `..` are a URL path's own segments, so a link to the schedule's page
# would land on the list or the overview instead.
SCHEDULE_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9._:-]{1,128}")
SCHEDULE_ID_RULE = (
    "must be 1-128 characters of letters, digits, '.', '_', ':' or '-', not dots alone"
)
# The names `POST /runs` accepts, so a schedule never starts a run no worker can name.
QUEUE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A workflow's name as a deploy allows it (app/runs/definitions.py).
WORKFLOW_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
WORKFLOW_NAME_RULE = "must be 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}")
LABEL_KEY_RULE = "keys are 1-63 letters, digits, '.', '_', '/', '-'"
REQUEST_KEYS = frozenset(
    {
        "schedule_id",
        "id",
        "spec",
        "cron",
        "timezone",
        "action",
        "workflow",
        "activation_id",
        "input",
        "overlap_policy",
        "missed_policy",
        "jitter_seconds",
        "max_runs",
        "labels",
        "memo",
        "search_attributes",
        "notes",
    }
)
# An action's fields, in the order forms show them.
ACTION_FIELDS = (
    "workflow",
    "activation_id",
    "input",
    "execution_timeout_seconds",
    "run_timeout_seconds",
    "queue",
)
ACTION_KEYS = frozenset(ACTION_FIELDS)
# Top-level shorthand -> (field it fills, key inside that field).
SHORTHANDS = {
    "cron": ("spec", "cron_expressions"),
    "timezone": ("spec", "timezone"),
    "workflow": ("action", "workflow"),
    "activation_id": ("action", "activation_id"),
    "input": ("action", "input"),
}
MAX_LABELS = 64
# A run's search attributes are strings, so `?search_attribute=k:v` matches on either database;
# a schedule's are copied onto its runs and follow the same rule.
MAX_SEARCH_ATTRIBUTES = 64
MAX_LABEL_VALUE = 256
MAX_NOTES = 4096
# A reason given for a change (pause, trigger, cancel ...), through any face.
MAX_REASON = 1024
MAX_JSON_BYTES = 64 * 1024
MAX_TIMEOUT_SECONDS = 366 * 86400
MAX_RUNS_LIMIT = 1_000_000_000


@dataclass(frozen=True)
class ScheduleConfig:
    """Everything a revision fixes about a schedule, normalized."""

    spec: Spec
    action: dict[str, Any]
    overlap_policy: str = "skip"
    missed_policy: str = "skip"
    jitter_seconds: int = 0
    max_runs: int | None = None
    labels: dict[str, str] | None = None
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, Any] | None = None
    notes: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The request-shaped JSON form, as revisions store it and PATCH merges into."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["spec"] = self.spec.to_dict()
        return data

    def changed_fields(self, other: ScheduleConfig) -> list[str]:
        """Names of the fields whose value differs from `other`'s."""
        mine, theirs = self.to_json(), other.to_json()
        return [name for name in mine if mine[name] != theirs[name]]


def parse_request(data: Mapping[str, Any]) -> tuple[str | None, ScheduleConfig]:
    """Validate a save request (long form or shorthands) into (schedule_id or None, config)."""
    if not isinstance(data, Mapping):
        raise invalid(["body"], "must be a JSON object")
    unknown = sorted(str(key) for key in data if key not in REQUEST_KEYS)
    if unknown:
        raise invalid([unknown[0]], "unknown field")
    merged = _expand_shorthands(data)
    schedule_id = _schedule_id(data)
    if merged.get("spec") is None:
        raise invalid(["spec"], "a spec (or the 'cron' shorthand) is required")
    try:
        spec = Spec.from_dict(merged["spec"])
    except CalendarError as exc:
        raise spec_error(data, exc) from None
    config = ScheduleConfig(
        spec=spec,
        action=_action(merged.get("action")),
        overlap_policy=_choice(data, "overlap_policy", OVERLAP_POLICIES),
        missed_policy=_choice(data, "missed_policy", MISSED_POLICIES),
        jitter_seconds=_integer(data, "jitter_seconds", 0, 0, MAX_JITTER_SECONDS),
        max_runs=_optional_integer(data, "max_runs", 1, MAX_RUNS_LIMIT),
        labels=check_keyed_strings(data.get("labels"), "labels", MAX_LABELS, MAX_LABEL_VALUE),
        memo=_json_object(data, "memo"),
        search_attributes=check_keyed_strings(
            data.get("search_attributes"), "search_attributes", MAX_SEARCH_ATTRIBUTES
        ),
        notes=_notes(data.get("notes")),
    )
    return schedule_id, config


def merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge of `patch` (shorthands allowed) into a request-shaped config."""
    if not isinstance(patch, Mapping):
        raise invalid(["body"], "must be a JSON object")
    unknown = sorted(str(key) for key in patch if key not in REQUEST_KEYS)
    if unknown:
        raise invalid([unknown[0]], "unknown field")
    expanded = _expand_shorthands(patch)
    action = expanded.get("action")
    if isinstance(action, Mapping):
        # Naming one target replaces the other: {"activation_id": X} pins, {"workflow": W} follows.
        for chosen, other in (("workflow", "activation_id"), ("activation_id", "workflow")):
            if action.get(chosen) is not None and other not in action:
                expanded["action"] = {**action, other: None}
    return _merge(dict(current), expanded)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def spec_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """The spec of a body that names a calendar (a preview): `spec`, or the `cron` and
    `timezone` shorthands, as saving takes them; 422 naming the field otherwise."""
    calendar = {key: data[key] for key in ("spec", "cron", "timezone") if key in data}
    spec = _expand_shorthands(calendar).get("spec")
    if spec is None:
        raise invalid(["spec"], "a spec (or the 'cron' shorthand) is required")
    return dict(spec) if isinstance(spec, Mapping) else spec


def label_pair(raw: str, loc: tuple[str, ...] = ("label",)) -> tuple[str, str]:
    """One label written `key:value` (as shown everywhere) or `key=value`; the key allows
    neither ':' nor '=', so the first of them separates. 422 naming `label` otherwise."""
    cut = min((i for i in (raw.find(":"), raw.find("=")) if i >= 0), default=-1)
    key, value = (raw[:cut].strip(), raw[cut + 1 :].strip()) if cut >= 0 else (raw, "")
    if cut < 0 or not LABEL_KEY.fullmatch(key):
        raise invalid(
            list(loc),
            f"{raw!r} is not a label: write key:value (the key is letters, digits, . _ / -)",
        )
    return key, value


def _expand_shorthands(data: Mapping[str, Any]) -> dict[str, Any]:
    """Move `cron`, `timezone`, `workflow`, `activation_id`, `input` into `spec` / `action`."""
    merged = {key: value for key, value in data.items() if key not in SHORTHANDS}
    for short, (field, key) in SHORTHANDS.items():
        if short not in data or (short == "cron" and data[short] is None):
            continue
        container = merged.get(field)
        if container is None:
            container = {}
        elif not isinstance(container, Mapping):
            raise invalid([field], "must be an object")
        value = [data[short]] if short == "cron" else data[short]
        if key in container or (short == "cron" and "cron" in container):
            raise invalid([short], f"use either {short!r} or {field}.{key}, not both")
        merged[field] = {**container, key: value}
    return merged


def spec_error(data: Mapping[str, Any], exc: CalendarError) -> CalendarError:
    """Report a calendar error where the user wrote the value: `cron`, `timezone` or `spec`."""
    loc = exc.loc
    if "cron" in data and loc[:2] == ("cron_expressions", 0):
        return CalendarError(exc.msg, ("cron", *loc[2:]), exc.code)
    if "timezone" in data and loc[:1] == ("timezone",):
        return CalendarError(exc.msg, loc, exc.code)
    return exc.within("spec")


def _schedule_id(data: Mapping[str, Any]) -> str | None:
    ids = {key: data[key] for key in ("schedule_id", "id") if data.get(key) is not None}
    if len(set(map(str, ids.values()))) > 1:
        raise invalid(["id"], "'id' and 'schedule_id' name different schedules")
    if not ids:
        return None
    key, value = next(iter(ids.items()))
    if not isinstance(value, str) or not SCHEDULE_ID.fullmatch(value):
        raise invalid([key], SCHEDULE_ID_RULE)
    return value


def _action(raw: Any) -> dict[str, Any]:
    if raw is None:
        raise invalid(["action"], "an action (workflow or activation_id) is required")
    if not isinstance(raw, Mapping):
        raise invalid(["action"], "must be an object")
    unknown = sorted(str(key) for key in raw if key not in ACTION_KEYS)
    if unknown:
        raise invalid(["action", unknown[0]], "unknown field")
    workflow, activation_id = raw.get("workflow"), raw.get("activation_id")
    if (workflow is None) == (activation_id is None):
        raise invalid(["action"], "give exactly one of 'workflow' and 'activation_id'")
    for key, value, limit in (
        ("workflow", workflow, 128),
        ("activation_id", activation_id, 36),
        ("queue", raw.get("queue"), 64),
    ):
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= limit):
            raise invalid(["action", key], f"must be a string of 1-{limit} characters")
    if workflow is not None and not WORKFLOW_NAME.fullmatch(workflow):
        # Matched whole, as deploys name workflows: `flow\n` is refused, not looked up.
        raise invalid(["action", "workflow"], WORKFLOW_NAME_RULE)
    queue = raw.get("queue")
    if queue is not None and not QUEUE.fullmatch(queue):
        raise invalid(["action", "queue"], "must be 1-64 letters, digits, '.', '_' or '-'")
    run_input = raw.get("input", {})
    _check_size(run_input, ["action", "input"])
    timeouts = {
        key: _optional_integer(raw, key, 1, MAX_TIMEOUT_SECONDS, ("action",))
        for key in ("execution_timeout_seconds", "run_timeout_seconds")
    }
    return {
        "workflow": workflow,
        "activation_id": activation_id,
        "input": {} if run_input is None else run_input,
        **timeouts,
        "queue": raw.get("queue"),
    }


def _choice(data: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = data.get(key)
    if value is None:
        return allowed[0]
    if value not in allowed:
        raise invalid([key], f"must be one of {', '.join(allowed)}")
    return str(value)


def _integer(data: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid([key], f"must be an integer from {low} to {high}")
    return value


def _optional_integer(
    data: Mapping[str, Any], key: str, low: int, high: int, prefix: tuple[str, ...] = ()
) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid([*prefix, key], f"must be null or an integer from {low} to {high}")
    return value


def check_keyed_strings(
    raw: Any, field: str, most: int, longest: int | None = None
) -> dict[str, str]:
    """Labels or search attributes: at most `most` string values (each at most `longest`
    characters), whose keys follow the labels' rule so a list filter (`?label=k:v`,
    `?search_attribute=k:v`, split at the first colon) can name every one."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise invalid([field], "must be an object of strings")
    if len(raw) > most:
        raise invalid([field], f"at most {most} {field.replace('_', ' ')}")
    for key, value in raw.items():
        if not LABEL_KEY.fullmatch(str(key)):
            raise invalid([field, str(key)], LABEL_KEY_RULE)
        if not isinstance(value, str) or (longest is not None and len(value) > longest):
            most_chars = f" of at most {longest} characters" if longest is not None else ""
            rule = "must be a string" + most_chars
            raise invalid([field, str(key)], rule)
    _check_size(raw, [field])
    return dict(raw)


def _json_object(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    raw = data.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise invalid([key], "must be an object")
    _check_size(raw, [key])
    return dict(raw)


def _check_size(value: Any, loc: list[str | int]) -> None:
    if json_size(value) > MAX_JSON_BYTES:
        raise invalid(loc, f"must be at most {MAX_JSON_BYTES} bytes of JSON")


def _notes(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > MAX_NOTES:
        raise invalid(["notes"], f"must be a string of at most {MAX_NOTES} characters")
    return raw
