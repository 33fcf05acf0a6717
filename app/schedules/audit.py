"""The audit stream: one registry of event types and their exact payload keys.

Every write goes through `event_row`, which refuses a payload whose keys differ from the
registry's: a wrong key is a programming error, never a silently different wire format.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

EVENT_KEYS: dict[str, frozenset[str]] = {
    "ScheduleCreated": frozenset(
        {"spec", "action", "overlap_policy", "next_fire_at", "command_context"}
    ),
    "SchedulePaused": frozenset({"reason", "paused_at", "command_context"}),
    "ScheduleResumed": frozenset({"next_fire_at", "command_context"}),
    "ScheduleUpdated": frozenset(
        {"changed_fields", "spec", "action", "overlap_policy", "next_fire_at", "command_context"}
    ),
    "ScheduleTriggered": frozenset(
        {
            "workflow_instance_id",
            "workflow_run_id",
            "outcome",
            "effective_overlap_policy",
            "trigger_number",
            "occurrence_time",
            "command_context",
        }
    ),
    "ScheduleTriggerSkipped": frozenset(
        {"reason", "skipped_trigger_count", "last_skipped_at", "command_context"}
    ),
    "ScheduleBlocked": frozenset({"reason", "blocked_at", "command_context"}),
    "ScheduleDeleted": frozenset({"reason", "deleted_at", "command_context"}),
}
# The origin event at the head of a started run's own history.
RUN_ORIGIN_KEYS = frozenset(
    {
        "schedule_id",
        "schedule_uid",
        "cron_expression",
        "timezone",
        "overlap_policy",
        "trigger_number",
        "occurrence_time",
    }
)
SOURCES = ("api", "console", "cli", "sdk", "scheduler")
# What a client may declare with `X-Almanac-Source`; informational, never a permission.
DECLARABLE_SOURCES = ("cli", "sdk")
# The longest `X-Request-Id` an audit event keeps, in characters.
MAX_REQUEST_ID = 128


def declared_source(header: str | None) -> str:
    """The audit source of an API request: `cli` or `sdk` when the client says so, else `api`."""
    return header if header in DECLARABLE_SOURCES else "api"


def declared_request_id(header: str | None) -> str | None:
    """The `X-Request-Id` a client sent, as it typed it: WSGI hands header bytes over as
    latin-1, so UTF-8 is decoded again (bytes that are not UTF-8 become U+FFFD), control
    characters are dropped, and the id is cut at 128 characters. None when nothing is left."""
    if not header:
        return None
    try:
        text = header.encode("latin-1").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = header
    text = "".join(c for c in text if c.isprintable()).strip()[:MAX_REQUEST_ID]
    return text or None


class AuditPayloadError(TypeError):
    """A payload that does not match the registry: a bug in the caller, not bad input."""


@dataclass(frozen=True)
class CommandContext:
    """Who asked for a change, through which door, and why (`command_context`)."""

    actor: str | None
    source: str
    request_id: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise AuditPayloadError(f"command source must be one of {SOURCES}, not {self.source!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "source": self.source,
            "request_id": self.request_id,
            "reason": self.reason,
        }

    def with_reason(self, reason: str | None) -> CommandContext:
        return CommandContext(self.actor, self.source, self.request_id, reason)


def check_payload(event_type: str, payload: dict[str, Any]) -> None:
    """Raise AuditPayloadError unless `payload` has exactly the registry's keys for the type."""
    expected = EVENT_KEYS.get(event_type)
    if expected is None:
        raise AuditPayloadError(f"unknown schedule event type {event_type!r}")
    keys = set(payload)
    if keys != expected:
        missing, extra = sorted(expected - keys), sorted(keys - expected)
        raise AuditPayloadError(f"{event_type} payload: missing {missing}, unexpected {extra}")


def check_origin(payload: dict[str, Any]) -> None:
    """The `ScheduleTriggered` origin event of a run has its own exact key set."""
    if set(payload) != RUN_ORIGIN_KEYS:
        raise AuditPayloadError(f"run origin payload keys {sorted(payload)} differ from registry")


def event_row(
    schedule_pk: int,
    sequence: int,
    now: datetime,
    event_type: str,
    payload: dict[str, Any],
    run_id: str | None = None,
    run_uid: str | None = None,
) -> dict[str, Any]:
    """A validated audit row for a bulk insert (the tick's hot path)."""
    check_payload(event_type, payload)
    return {
        "schedule_pk": schedule_pk,
        "sequence": sequence,
        "event_type": event_type,
        "payload": payload,
        "workflow_instance_id": run_id,
        "workflow_run_id": run_uid,
        "recorded_at": now,
    }
