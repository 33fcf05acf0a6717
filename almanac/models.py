"""Typed results for every resource the API answers with.

Each result is a dataclass built from the JSON body: fields the client knows are typed (instants
become timezone-aware `datetime`s), and the whole body stays in `.raw`, so fields a newer server
adds are never lost.

A field without a default is one the API always sends: `from_json` refuses a body that lacks it
or holds it with another JSON type (the clients answer that as `BAD_RESPONSE`), so an answer
that is not the API's never reads as an empty result. Fields with a default may be missing.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from functools import cache
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Resource")


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 instant from the API (`...Z`) as an aware datetime; None stays None."""
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(kw_only=True)
class Resource:
    """Base of every result: typed fields plus the untouched JSON body in `raw`."""

    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Field name -> Resource class for nested objects (lists of them too).
    nested: ClassVar[dict[str, type[Resource]]] = {}

    @classmethod
    def from_json(cls: type[R], data: dict[str, Any]) -> R:
        if not isinstance(data, dict):
            raise ShapeError(f"{cls.__name__} needs a JSON object, not {type(data).__name__}")
        values: dict[str, Any] = {}
        # Classes hash by identity (`type.__hash__`), but mypy checks `type[R]` against Hashable
        # with the instances' `__hash__`, which `@dataclass` (eq without frozen) sets to None.
        for name, is_time, kinds in _plan(cls):  # type: ignore[arg-type]
            if name not in data:
                if kinds is not None:
                    raise ShapeError(f"{cls.__name__} needs {name!r}")
                continue
            value = data[name]
            if kinds is not None and not _holds(kinds, value):
                raise ShapeError(f"{cls.__name__}.{name} is not {' or '.join(kinds)}")
            kind = cls.nested.get(name)
            if kind is not None and value is not None:
                value = (
                    [kind.from_json(v) for v in value]
                    if isinstance(value, list)
                    else kind.from_json(value)
                )
            elif is_time:
                value = parse_time(value)
            values[name] = value
        return cls(**values, raw=data)

    def __getitem__(self, key: str) -> Any:
        """The API's value of `key` as sent (`raw[key]`): items of lists that were plain dicts
        before they were typed (`Schedule.upcoming`, `TickResult.rows`) still read the same."""
        return self.raw[key]


class ShapeError(ValueError):
    """A body without the shape of the resource: a required field missing or of another type."""


# The JSON types a field's annotation admits ("datetime" is sent as text, "Any" is anything).
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
    "datetime": (str,),
    "Any": (object,),
}


def _holds(kinds: tuple[str, ...], value: Any) -> bool:
    # JSON true is not a number, though Python's bool is an int.
    if isinstance(value, bool):
        return "bool" in kinds or "Any" in kinds
    return any(isinstance(value, JSON_TYPES[kind]) for kind in kinds)


@cache
def _plan(cls: type[Resource]) -> tuple[tuple[str, bool, tuple[str, ...] | None], ...]:
    """(field name, is an instant, JSON types if required) per field, once per class: history
    walks are hot."""
    plan = []
    for f in fields(cls):
        if f.name == "raw":
            continue
        required = f.default is MISSING and f.default_factory is MISSING
        kinds = tuple(part.strip().split("[")[0] for part in str(f.type).split("|"))
        plan.append((f.name, "datetime" in str(f.type), kinds if required else None))
    return tuple(plan)


@dataclass(kw_only=True)
class PreviewOccurrence(Resource):
    at: datetime | None = None
    local: str
    utc_offset: str
    note: str | None = None


@dataclass(kw_only=True)
class Schedule(Resource):
    schedule_id: str
    uid: str
    namespace: str
    revision: int
    status: str
    blocked_reason: str | None = None
    paused_reason: str | None = None
    principal: str | None = None
    spec: dict[str, Any]
    action: dict[str, Any]
    overlap_policy: str
    missed_policy: str
    jitter_seconds: int
    max_runs: int | None = None
    labels: dict[str, str] | None = None
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, Any] | None = None
    notes: str | None = None
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    fires_count: int
    remaining_runs: int | None = None
    skipped_trigger_count: int = 0
    last_skip_reason: str | None = None
    last_skipped_at: datetime | None = None
    buffered_count: int = 0
    latest_run_id: str | None = None
    running_run_ids: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted_at: datetime | None = None
    # The next due times, answered by a read (`get_schedule`) only.
    upcoming: list[PreviewOccurrence] | None = None
    nested: ClassVar[dict[str, type[Resource]]] = {"upcoming": PreviewOccurrence}


@dataclass(kw_only=True)
class ScheduleHistoryEvent(Resource):
    id: int
    sequence: int
    event_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    workflow_instance_id: str | None = None
    workflow_run_id: str | None = None
    recorded_at: datetime | None = None


@dataclass(kw_only=True)
class ScheduleHistoryPage(Resource):
    schedule_id: str
    namespace: str
    events: list[ScheduleHistoryEvent]
    next_cursor: int | None = None
    has_more: bool
    nested: ClassVar[dict[str, type[Resource]]] = {"events": ScheduleHistoryEvent}


@dataclass(kw_only=True)
class Occurrence(Resource):
    kind: str
    instant: datetime | None = None
    through: datetime | None = None
    reason: str | None = None
    run_id: str | None = None
    revision: int | None = None
    observed_at: datetime | None = None
    # Where the occurrence came from (scheduled, manual, backfill), and how many canonical
    # occurrences the row covers (a skipped row is a range, instant through `through`).
    origin: str | None = None
    count: int | None = None


@dataclass(kw_only=True)
class TriggerResult(Resource):
    outcome: str
    run_id: str | None = None
    reason: str | None = None


@dataclass(kw_only=True)
class BackfillItem(Resource):
    occurrence_time: datetime | None = None
    outcome: str
    run_id: str | None = None
    reason: str | None = None


@dataclass(kw_only=True)
class BackfillResult(Resource):
    results: list[BackfillItem]
    started: int
    skipped: int
    requests: int = 1
    nested: ClassVar[dict[str, type[Resource]]] = {"results": BackfillItem}


@dataclass(kw_only=True)
class SimulatedOccurrence(Resource):
    occurrence_time: datetime | None = None
    due_at: datetime | None = None
    outcome: str
    reason: str | None = None
    run_id: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    ends_runs: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Simulation(Resource):
    items: list[SimulatedOccurrence]
    summary: dict[str, int]
    truncated: bool
    nested: ClassVar[dict[str, type[Resource]]] = {"items": SimulatedOccurrence}


@dataclass(kw_only=True)
class Run(Resource):
    run_id: str
    uid: str
    namespace: str
    workflow: str
    version: int
    activation_id: str | None = None
    schedule_id: str | None = None
    status: str
    input: Any = None
    output: Any = None
    error: Any = None
    current_step: str | None = None
    queue: str | None = None
    labels: dict[str, str] | None = None
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, str] | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(kw_only=True)
class RunHistoryEvent(Resource):
    id: int
    sequence: int
    event_type: str
    node_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    recorded_at: datetime | None = None


@dataclass(kw_only=True)
class Replay(Resource):
    replayed: dict[str, Any]
    stored: dict[str, Any]
    agree: bool


@dataclass(kw_only=True)
class SignalResult(Resource):
    signal_id: str | int | None = None
    accepted_at: datetime | None = None
    status: str
    reason: str | None = None


@dataclass(kw_only=True)
class Task(Resource):
    id: str | int
    run_id: str
    node_id: str
    title: str
    role: str | None = None
    status: str
    output: Any = None
    created_at: datetime | None = None
    due_at: datetime | None = None
    completed_at: datetime | None = None
    completed_by: str | None = None


@dataclass(kw_only=True)
class Incident(Resource):
    id: str | int
    run_id: str
    node_id: str
    branch_path: list[str]
    error: Any = None
    attempts: int
    opened_at: datetime | None = None
    resolved_at: datetime | None = None
    resolution: str | None = None
    report: dict[str, Any] | None = None


@dataclass(kw_only=True)
class VersionSummary(Resource):
    version: int
    created_at: datetime | None = None


@dataclass(kw_only=True)
class WorkflowVersion(Resource):
    name: str
    version: int
    definition: dict[str, Any]
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # Every deployed version of the workflow, answered by `get_workflow` only.
    versions: list[VersionSummary] | None = None
    nested: ClassVar[dict[str, type[Resource]]] = {"versions": VersionSummary}


@dataclass(kw_only=True)
class Activation(Resource):
    id: str
    workflow: str
    version: int
    status: str
    created_at: datetime | None = None
    retired_at: datetime | None = None


@dataclass(kw_only=True)
class Namespace(Resource):
    name: str
    max_active_runs: int | None = None
    created_at: datetime | None = None


@dataclass(kw_only=True)
class NamespaceRole(Resource):
    name: str
    role: str


@dataclass(kw_only=True)
class Me(Resource):
    username: str
    superuser: bool
    namespaces: list[NamespaceRole]
    nested: ClassVar[dict[str, type[Resource]]] = {"namespaces": NamespaceRole}


@dataclass(kw_only=True)
class TickRow(Resource):
    """What one tick did to one schedule: `outcome` triggered, buffered, skipped, drained,
    blocked or refused (capacity)."""

    schedule_id: str
    namespace: str
    outcome: str
    occurrence_time: datetime | None = None
    run_id: str | None = None
    next_fire_at: datetime | None = None


@dataclass(kw_only=True)
class TickFailure(Resource):
    """A phase of the tick that failed (the rest of the tick went on), with its cause."""

    phase: str
    where: str = ""
    cause: str = ""


@dataclass(kw_only=True)
class TickResult(Resource):
    now: datetime | None = None
    rows: list[TickRow]
    deadlines: int
    steps: int
    failures: list[TickFailure] = field(default_factory=list)
    nested: ClassVar[dict[str, type[Resource]]] = {"rows": TickRow, "failures": TickFailure}
