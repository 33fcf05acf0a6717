"""Overlap policies against the schedule's active runs, and buffers (docs/schedules.md)."""

from __future__ import annotations


def outcomes(rows):
    return [
        (r["outcome"], r["occurrence_time"][11:16] if r["occurrence_time"] else None) for r in rows
    ]


def test_skip_skips_while_a_run_is_active(h):
    h.create("s", overlap_policy="skip")
    assert outcomes(h.tick("12:05")) == [("triggered", "12:05")]
    assert outcomes(h.tick("12:10")) == [("skipped", "12:10")]
    h.finish()
    assert outcomes(h.tick("12:15")) == [("triggered", "12:15")]
    skipped = [o for o in h.ledger() if o["kind"] == "skipped"]
    assert [(o["instant"], o["reason"]) for o in skipped] == [
        ("2026-01-05T12:10:00Z", "overlap_policy_skip")
    ]
    event = [e for e in h.history() if e["event_type"] == "ScheduleTriggerSkipped"][0]
    assert event["payload"]["reason"] == "overlap_policy_skip"
    assert event["payload"]["skipped_trigger_count"] == 1


def test_buffer_one_keeps_one_and_skips_the_rest_with_buffer_full(h):
    h.create("s", overlap_policy="buffer_one")
    h.tick("12:05")
    assert outcomes(h.tick("12:10")) == [("buffered", "12:10")]
    assert outcomes(h.tick("12:15")) == [("skipped", "12:15")]
    data = h.read()
    assert data["buffered_count"] == 1 and data["last_skip_reason"] == "buffer_full"
    h.finish()
    rows = h.tick("12:16")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("drained", "schedule:s:20260105T121000Z")
    ]
    ledger = h.ledger()
    assert [(o["kind"], o["instant"][11:16], o["reason"]) for o in ledger] == [
        ("started", "12:05", None),
        ("started", "12:10", None),
        ("skipped", "12:15", "buffer_full"),
    ]
    assert h.read()["buffered_count"] == 0
    drained = h.history()[-1]
    assert drained["event_type"] == "ScheduleTriggered"
    assert drained["payload"]["outcome"] == "drained"


def test_buffer_all_drains_fifo_one_per_tick(h):
    h.create("s", overlap_policy="buffer_all")
    h.tick("12:05")
    for minute in ("12:10", "12:15", "12:20"):
        assert outcomes(h.tick(minute)) == [("buffered", minute)]
    assert h.read()["buffered_count"] == 3
    started = []
    for second in range(3):
        h.finish()
        rows = h.tick(f"12:21:{second:02d}")
        assert [r["outcome"] for r in rows] == ["drained"]
        started.append(rows[0]["run_id"])
        # A second tick with the run still active drains nothing more.
        assert h.tick(f"12:21:{second:02d}") == []
    assert started == [
        "schedule:s:20260105T121000Z",
        "schedule:s:20260105T121500Z",
        "schedule:s:20260105T122000Z",
    ]
    assert h.read()["buffered_count"] == 0


def test_buffered_occurrences_queue_behind_each_other_even_without_an_active_run(h):
    h.create("s", overlap_policy="buffer_all")
    h.tick("12:05")
    h.tick("12:10")
    h.finish()
    # The buffer drains first, then the new occurrence finds that run active and queues.
    rows = h.tick("12:15")
    assert outcomes(rows) == [("drained", "12:10"), ("buffered", "12:15")]


def test_allow_all_starts_alongside(h):
    h.create("s", overlap_policy="allow_all")
    h.tick("12:05")
    h.tick("12:10")
    assert h.read()["running_run_ids"] == [
        "schedule:s:20260105T120500Z",
        "schedule:s:20260105T121000Z",
    ]


def test_cancel_other_ends_the_old_run_and_starts_the_new(h):
    h.create("s", overlap_policy="cancel_other")
    h.tick("12:05")
    assert outcomes(h.tick("12:10")) == [("triggered", "12:10")]
    old, new = h.runs()
    assert old.status == "cancelled" and old.cancel_requested_at is not None
    assert new.status == "pending"
    events = [e.event_type for e in h.run_events(old.run_id)]
    assert events[-2:] == ["cancel_requested", "run_cancelled"]


def test_terminate_other_ends_the_old_run_and_starts_the_new(h):
    h.create("s", overlap_policy="terminate_other")
    h.tick("12:05")
    assert outcomes(h.tick("12:10")) == [("triggered", "12:10")]
    old, new = h.runs()
    assert old.status == "terminated" and new.status == "pending"
    assert h.run_events(old.run_id)[-1].event_type == "run_terminated"
    assert h.read()["running_run_ids"] == [new.run_id]


def test_pause_drops_the_buffer_as_skipped(h):
    h.create("s", overlap_policy="buffer_all")
    h.tick("12:05")
    h.tick("12:10")
    h.tick("12:15")
    h.post("s", "pause")
    data = h.read()
    assert data["buffered_count"] == 0
    kinds = [(o["kind"], o["instant"][11:16], o["reason"]) for o in h.ledger()]
    assert kinds == [
        ("started", "12:05", None),
        ("skipped", "12:10", "paused"),
        ("skipped", "12:15", "paused"),
    ]
    h.finish()
    assert h.tick("12:16") == []
