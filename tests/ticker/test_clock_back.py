"""The clock moved back an hour: nothing fires twice (bench/clock_drill.py drills it under load)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.support.schedules_harness import at, utc


def _every_30s(start: str, end: str) -> list[datetime]:
    """Instants from `start` to `end` inclusive, 30 s apart."""
    first, last = at(start), at(end)
    return [first + timedelta(seconds=30 * n) for n in range(int((last - first).seconds / 30) + 1)]


def _accounted(ledger: list[dict]) -> list[tuple[str, str]]:
    """(first, last) instant of every ledger row, oldest first."""
    return [(row["instant"], row["through"] or row["instant"]) for row in ledger]


def test_moving_the_clock_back_an_hour_fires_nothing_already_fired_or_skipped(h):
    activation = h.workflow()
    h.create("m", cron="* * * * *", activation_id=activation, overlap_policy="allow_all")
    every = {"intervals": [{"every": "PT30S"}]}
    body = {"id": "i", "spec": every, "activation_id": activation, "input": {}}
    h.save(body | {"overlap_policy": "allow_all"}, expect=201)

    # An hour of firing, with a gap the skip policy turns into one skipped range each.
    for instant in _every_30s("12:00", "12:10") + _every_30s("12:40", "13:05"):
        h.tick(instant)
    fired = {s: h.ledger(s) for s in ("m", "i")}
    assert fired["m"][-1] == fired["m"][-1] | {"kind": "started", "instant": utc("13:05")}
    assert [r["kind"] for r in fired["m"]].count("skipped") == 1
    runs_before = [r.run_id for r in h.runs()]

    # Back an hour, and forward through instants already fired, already skipped, and T1 itself.
    for instant in (
        _every_30s("12:05", "12:12") + _every_30s("12:38", "12:42") + _every_30s("13:04", "13:05")
    ):
        assert h.tick(instant) == [], instant
    assert {s: h.ledger(s) for s in ("m", "i")} == fired
    assert [r.run_id for r in h.runs()] == runs_before
    assert h.read("m")["next_fire_at"] == utc("13:06")

    # Forward again: firing resumes with the next occurrence, once.
    fired_rows = [h.tick("13:05:30"), h.tick("13:06"), h.tick("13:06")]
    assert [
        sorted((r["schedule_id"], r["occurrence_time"]) for r in rows) for rows in fired_rows
    ] == [
        [("i", utc("13:05:30"))],
        [("i", utc("13:06")), ("m", utc("13:06"))],
        [],
    ]
    run_ids = [r.run_id for r in h.runs()]
    assert len(run_ids) == len(set(run_ids)) == len(runs_before) + 3
    for schedule_id in ("m", "i"):
        spans = _accounted(h.ledger(schedule_id))
        # Each row starts after the previous one ends: no occurrence is accounted twice.
        assert all(spans[n][0] > spans[n - 1][1] for n in range(1, len(spans))), spans
        started = [r for r in h.ledger(schedule_id) if r["kind"] == "started"]
        assert len(started) == len(h.runs(schedule_id))
