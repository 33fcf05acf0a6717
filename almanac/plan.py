"""Schedules as code: compare save bodies with the server and plan create/update/unchanged/delete.

A body and a stored schedule are compared after both are brought to one normal form: the
shorthands (`cron`, `timezone`, `workflow`, `activation_id`, `input`, `id`) expanded, defaults
filled in, durations compared by length and instants by the moment they name, values compared
as JSON (`false` is not `0`). Equal configurations are left alone, so applying the same files
twice writes no revision; what the normal form cannot hold (unknown keys, a shorthand beside its
long form, an `id` naming another schedule) counts as changed, so the server judges it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from almanac.errors import AlmanacError, Conflict, NotFound, ValidationError

if TYPE_CHECKING:
    from almanac.client import Client


CONFIG_FIELDS = (
    "spec",
    "action",
    "overlap_policy",
    "missed_policy",
    "jitter_seconds",
    "max_runs",
    "labels",
    "memo",
    "search_attributes",
    "notes",
)
DEFAULTS: dict[str, Any] = {
    "overlap_policy": "skip",
    "missed_policy": "skip",
    "jitter_seconds": 0,
    "max_runs": None,
    "labels": {},
    "memo": {},
    "search_attributes": {},
    "notes": None,
}
ACTION_DEFAULTS: dict[str, Any] = {
    "workflow": None,
    "activation_id": None,
    "input": {},
    "execution_timeout_seconds": None,
    "run_timeout_seconds": None,
    "queue": None,
}
DURATION = re.compile(
    r"P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)
SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
# A dry run checks a body by simulating it over one second: the server parses and checks it as a
# save would and writes nothing; the window only has to be valid, so any fixed one will do.
CHECK_WINDOW = ("2000-01-01T00:00:00Z", "2000-01-01T00:00:01Z")
# The keys a save body may hold at each level; the server refuses any other.
BODY_KEYS = frozenset(
    {"schedule_id", "id", "cron", "timezone", "workflow", "activation_id", "input", *CONFIG_FIELDS}
)
SPEC_KEYS = frozenset({"cron_expressions", "cron", "intervals", "timezone", "start_at", "end_at"})
INTERVAL_KEYS = frozenset({"every", "offset"})
# Top-level shorthand -> (the field it fills, the keys there a save refuses it beside).
SHORTHAND_KEYS = {
    "cron": ("spec", ("cron_expressions", "cron")),
    "timezone": ("spec", ("timezone",)),
    "workflow": ("action", ("workflow",)),
    "activation_id": ("action", ("activation_id",)),
    "input": ("action", ("input",)),
}
# Keys the simulation takes beside the save body: a save refuses them, so the check must too.
WINDOW_KEYS = ("from", "to", "run_duration")


def body_id(body: Mapping[str, Any]) -> str | None:
    value = body.get("schedule_id") or body.get("id")
    return str(value) if value is not None else None


def _duration(value: Any) -> Any:
    match = DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None or value in ("P", "PT"):
        return value
    return sum(float(v) * SECONDS[k] for k, v in match.groupdict().items() if v)


# A fraction of a second in an instant's text: Python keeps six digits and drops the rest.
FRACTION = re.compile(r"[.,](\d+)")


def _finer_digits(value: str) -> str:
    """The digits of `value` finer than a microsecond, trailing zeros left out."""
    fraction = FRACTION.search(value)
    return fraction.group(1)[6:].rstrip("0") if fraction else ""


def _instant(value: Any, round_up: bool = False) -> Any:
    """The moment `value` names as the server stores it, in UTC to the microsecond.

    The server keeps microseconds: a lower bound (`start_at`) with finer digits moves up to the
    next microsecond (a bound 100 ns after an occurrence never takes it in), an inclusive upper
    bound (`end_at`) down: `...00.0000001Z` starts a microsecond after `...00Z`, so it differs.
    """
    if not isinstance(value, str):
        return value
    try:
        moment = datetime.fromisoformat(value[:-1] + "Z" if value.endswith("z") else value)
    except ValueError:
        return value
    if moment.tzinfo is None:
        return moment
    if round_up and _finer_digits(value):
        moment += timedelta(microseconds=1)
    return moment.astimezone(UTC)


def _bounds(spec: Mapping[str, Any]) -> tuple[Any, Any]:
    """`start_at` and `end_at` as the server reads them: an `end_at` naming the very same
    instant as `start_at` (finer digits too) rounds with it, so equal bounds stay equal."""
    start, end = spec.get("start_at"), spec.get("end_at")
    start_at = _instant(start, round_up=True)
    same = (
        isinstance(start, str)
        and isinstance(end, str)
        and _instant(start) == _instant(end)
        and _finer_digits(start) == _finer_digits(end)
    )
    return start_at, _instant(end, round_up=same)


def _or(value: Any, default: Any) -> Any:
    """`default` for a missing or null value only: `false`, `0` or `""` are values a save checks."""
    return default if value is None else value


def _expressions(spec: Mapping[str, Any], cron: Any) -> Any:
    listed = _or(spec.get("cron_expressions"), [])
    if not isinstance(listed, list):
        return listed
    expressions = [*listed, *(e for e in (spec.get("cron"), cron) if e is not None)]
    if not all(isinstance(e, str) for e in expressions):
        return expressions
    return list(dict.fromkeys(" ".join(e.split()) for e in expressions))


def _interval(interval: Any) -> Any:
    if not isinstance(interval, Mapping):
        return interval
    return (_duration(interval.get("every")), _duration(_or(interval.get("offset"), "PT0S")))


def _spec(spec: Any, cron: Any = None, timezone: Any = None) -> Any:
    if spec is not None and not isinstance(spec, Mapping):
        return spec
    spec = spec or {}
    intervals = _or(spec.get("intervals"), [])
    start_at, end_at = _bounds(spec)
    return {
        "cron_expressions": _expressions(spec, cron),
        "intervals": [_interval(i) for i in intervals]
        if isinstance(intervals, list)
        else intervals,
        "timezone": _or(timezone, _or(spec.get("timezone"), "UTC")),
        "start_at": start_at,
        "end_at": end_at,
    }


def _action(body: Mapping[str, Any]) -> Any:
    action = body.get("action")
    if action is not None and not isinstance(action, Mapping):
        return action
    action = dict(action or {})
    for short in ("workflow", "activation_id", "input"):
        if short in body and short not in action:
            action[short] = body[short]
    return {key: _or(action.get(key), default) for key, default in ACTION_DEFAULTS.items()}


def normalize(body: Mapping[str, Any]) -> dict[str, Any]:
    """The comparable configuration of a save body or a stored schedule.

    A value of the wrong shape (`false` for a number, a list for the spec) is kept as it is, so
    it compares unequal to what the server stores and the server, not this form, refuses it.
    """
    config = {key: _or(body.get(key), default) for key, default in DEFAULTS.items()}
    spec = _spec(body.get("spec"), body.get("cron"), body.get("timezone"))
    return {"spec": spec, "action": _action(body), **config}


def same(mine: Any, theirs: Any) -> bool:
    """Equal as JSON values: unlike Python's `==`, `false`, `0` and `0.0` are all different."""
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        return mine.keys() == theirs.keys() and all(same(mine[k], theirs[k]) for k in mine)
    if isinstance(mine, list | tuple) and isinstance(theirs, list | tuple):
        return len(mine) == len(theirs) and all(map(same, mine, theirs))
    return type(mine) is type(theirs) and mine == theirs


def unheld_fields(body: Mapping[str, Any]) -> list[str]:
    """The body's fields that the normal form drops: unknown keys (at the top, in the spec, its
    intervals or the action) and shorthands beside their long form. A save refuses them."""
    fields = [str(key) for key in body if key not in BODY_KEYS]
    spec, action = body.get("spec"), body.get("action")
    if isinstance(spec, Mapping):
        intervals = spec.get("intervals")
        nested = (
            [i for i in intervals if isinstance(i, Mapping)] if isinstance(intervals, list) else []
        )
        if set(spec) - SPEC_KEYS or any(set(i) - INTERVAL_KEYS for i in nested):
            fields.append("spec")
    if isinstance(action, Mapping) and set(action) - set(ACTION_DEFAULTS):
        fields.append("action")
    for short, (field_name, keys) in SHORTHAND_KEYS.items():
        container = body.get(field_name)
        given = short in body and not (short == "cron" and body[short] is None)
        if given and isinstance(container, Mapping) and any(k in container for k in keys):
            fields.append(short)
    return fields


def changed_fields(body: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The fields a save of `body` would change in `stored`.

    What the normal form cannot hold counts as changed (the fields of `unheld_fields`, an `id`
    naming another schedule), so the update is sent and the server says what it makes of it.
    """
    mine, theirs = normalize(body), normalize(stored)
    changed = [name for name in CONFIG_FIELDS if not same(mine[name], theirs[name])]
    ids = [k for k in ("schedule_id", "id") if body.get(k) is not None]
    changed += [k for k in ids if not same(body[k], stored.get("schedule_id"))]
    return changed + [name for name in unheld_fields(body) if name not in changed]


@dataclass
class Step:
    """One line of the plan."""

    schedule_id: str
    action: str  # create | update | unchanged | delete | conflict
    changed_fields: list[str] = field(default_factory=list)
    body: dict[str, Any] | None = None
    revision: int | None = None
    file: str | None = None
    # What the server answered (or, in a dry run, would answer) to this step.
    error: AlmanacError | None = None

    def to_json(self) -> dict[str, Any]:
        step: dict[str, Any] = {
            "schedule_id": self.schedule_id,
            "action": self.action,
            "changed_fields": self.changed_fields,
            "file": self.file,
        }
        if self.error is not None:
            error = self.error
            step["error"] = {"code": error.code, "message": error.message, "details": error.details}
        return step


def plan(client: Client, sources: Iterable[tuple[str, dict[str, Any]]], prune: bool) -> list[Step]:
    """What applying the bodies would do, reading each schedule's current revision.

    `sources` are (file, body) pairs: each step remembers its file, to name it when it fails.

    Deleted schedules are read too: the server never reuses their ids, so a body naming one is a
    `conflict` step, known before anything is written (a dry run reports it like the real apply).
    """
    known = {s.schedule_id: s for s in client.list_schedules(limit=100, include_deleted=True)}
    existing = {i: s for i, s in known.items() if s.status != "deleted"}
    steps: list[Step] = []
    listed = set()
    for file, body in sources:
        schedule_id = body_id(body)
        assert schedule_id is not None
        listed.add(schedule_id)
        current = existing.get(schedule_id)
        if current is None:
            action = "conflict" if schedule_id in known else "create"
            fields = [] if schedule_id in known else list(CONFIG_FIELDS)
            steps.append(Step(schedule_id, action, fields, body, file=file))
            continue
        changed = changed_fields(body, current.raw)
        action = "update" if changed else "unchanged"
        steps.append(Step(schedule_id, action, changed, body, current.revision, file))
    if prune:
        for schedule_id in sorted(set(existing) - listed):
            steps.append(Step(schedule_id, "delete", revision=existing[schedule_id].revision))
    return steps


def refusal(steps: Iterable[Step]) -> Conflict | None:
    """The error of the plan's first `conflict` step: what the server would answer to it."""
    for step in steps:
        if step.action == "conflict":
            message = f"schedule {step.schedule_id!r} is deleted; its id is never reused"
            return Conflict("SCHEDULE_DELETED", message, {"schedule_id": step.schedule_id}, 409)
    return None


BODY_REFUSALS = frozenset({400, 413})


def check(client: Client, steps: Iterable[Step]) -> bool:
    """Ask the server whether it would accept each create and update body, writing nothing.

    A refusal of the body itself (400, 409, 413 or 422) becomes the step's `error`, so every
    refused body is reported; any other error (no access, the server failing) is raised. False
    when the server has no simulation route (404) to ask: the plan is then unchecked.
    """
    for step in steps:
        if step.action not in ("create", "update") or step.body is None:
            continue
        extra = [key for key in WINDOW_KEYS if key in step.body]
        if extra:
            msg = "Extra inputs are not permitted"
            errors = [{"loc": [key], "msg": msg} for key in extra]
            step.error = ValidationError(
                "VALIDATION", f"{extra[0]}: {msg}", {"errors": errors}, 422
            )
            continue
        try:
            client.simulate_save(step.body, *CHECK_WINDOW)
        except (ValidationError, Conflict) as exc:
            step.error = exc
        except NotFound:
            return False
        except AlmanacError as exc:
            # A body too large (the real apply reports it as this step's failure) or malformed.
            if exc.status not in BODY_REFUSALS:
                raise
            step.error = exc
    return True


def execute(client: Client, steps: list[Step], done: Callable[[Step], None]) -> None:
    """Carry out a plan; each change sends the revision read by `plan` (If-Match).

    `done` receives each step once it is carried out, and the failing step (with its `error`)
    before the error is raised: the steps after it are not tried. A plan with a `conflict` step
    is refused whole, before any change: it could not complete.
    """
    refused = refusal(steps)
    if refused is not None:
        raise refused
    for step in steps:
        try:
            _carry_out(client, step)
        except AlmanacError as exc:
            step.error = exc
            done(step)
            raise
        done(step)


def _carry_out(client: Client, step: Step) -> None:
    if step.action == "create":
        client.save_schedule(step.body or {})
    elif step.action == "update":
        saved = client.save_schedule(step.body or {}, step.revision)
        if saved.revision == step.revision:
            # The server found nothing to change (a secret compares only as `***` here, so the
            # plan could not tell) and wrote nothing: report it as it is.
            step.action, step.changed_fields = "unchanged", []
    elif step.action == "delete":
        client.delete_schedule(step.schedule_id, step.revision or 0, "removed by apply --prune")
