"""One line per audit event, so the history modal reads without opening payloads."""

from __future__ import annotations

from typing import Any

NAMES = {
    "ScheduleCreated": "created",
    "ScheduleUpdated": "updated",
    "SchedulePaused": "paused",
    "ScheduleResumed": "resumed",
    "ScheduleTriggered": "run",
    "ScheduleTriggerSkipped": "skipped",
    "ScheduleBlocked": "blocked",
    "ScheduleDeleted": "deleted",
}


def event_line(event: dict[str, Any]) -> str:
    """E.g. "olga via console: updated notes, spec", "scheduler: run triggered",
    "olga via api: skipped (overlap policy skip) — because: by hand"."""
    payload = event.get("payload") or {}
    context = payload.get("command_context") or {}
    parts = [_who(context) + ":", NAMES.get(event.get("event_type", ""), event.get("event_type"))]
    changed = payload.get("changed_fields")
    if changed:
        parts.append(", ".join(str(name).replace("_", " ") for name in changed))
    if payload.get("outcome"):
        parts.append(str(payload["outcome"]))
    reason = payload.get("reason")
    if reason:
        # A code (overlap_policy_skip) reads as words; a reason someone typed is quoted as is.
        typed = reason == context.get("reason")
        parts.append(f"({reason if typed else str(reason).replace('_', ' ')})")
    text = " ".join(str(part) for part in parts if part)
    if context.get("reason") and context.get("reason") != payload.get("reason"):
        text += f" — because: {context['reason']}"
    return text


def _who(context: dict[str, Any]) -> str:
    actor, source = context.get("actor"), context.get("source")
    if source == "scheduler":
        return "scheduler" + (f" for {actor}" if actor else "")
    if actor and source:
        return f"{actor} via {source}"
    return str(actor or source or "someone")
