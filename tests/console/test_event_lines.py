"""The history modal's one-line summaries quote what people typed and spell out codes."""

from __future__ import annotations

from app.console.event_lines import event_line


def _context(reason=None, actor="olga", source="console"):
    return {"actor": actor, "source": source, "request_id": "r", "reason": reason}


def test_a_typed_reason_is_quoted_as_typed_and_a_code_reads_as_words():
    paused = {
        "event_type": "SchedulePaused",
        "payload": {"reason": "deploy_v2_fix", "command_context": _context("deploy_v2_fix")},
    }
    assert event_line(paused) == "olga via console: paused (deploy_v2_fix)"
    skipped = {
        "event_type": "ScheduleTriggerSkipped",
        "payload": {
            "reason": "overlap_policy_skip",
            "command_context": _context(None, "sam", "scheduler"),
        },
    }
    assert event_line(skipped) == "scheduler for sam: skipped (overlap policy skip)"
    deleted = {
        "event_type": "ScheduleDeleted",
        "payload": {"reason": "requested", "command_context": _context("old_job_retired")},
    }
    assert event_line(deleted) == "olga via console: deleted (requested) — because: old_job_retired"
