"""The steps of a run derived from its history alone: lanes, statuses, attempts, times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from app.console.gantt import ROW, TOP, gantt, short_duration, tick_label, tick_offsets
from app.runs.steps_view import derive_steps

T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)


def history(*rows: tuple) -> list[SimpleNamespace]:
    """(seconds after T0, event type, node id, branch path, payload) as stored events."""
    return [
        SimpleNamespace(
            sequence=index + 1,
            event_type=kind,
            node_id=node,
            branch_path=path,
            payload=payload or {},
            recorded_at=T0 + timedelta(seconds=at),
        )
        for index, (at, kind, node, path, payload) in enumerate(rows)
    ]


EU, US = ["fan-out/eu"], ["fan-out/us"]
PARALLEL_RUN = history(
    (0, "run_started", None, None, {}),
    (0, "step_started", "prepare", None, {"type": "action", "attempt": 1}),
    (2, "step_completed", "prepare", None, {"output": {"rows": 3}}),
    (2, "step_started", "fan-out", None, {"type": "parallel", "branches": ["eu", "us"]}),
    (2, "branch_started", "fan-out", EU, {"branch": "eu"}),
    (2, "step_started", "eu-load", EU, {"type": "action", "attempt": 1}),
    (2, "branch_started", "fan-out", US, {"branch": "us"}),
    (2, "step_started", "us-load", US, {"type": "action", "attempt": 1}),
    (5, "step_failed", "us-load", US, {"attempt": 1, "will_retry": True, "error": {"m": "x"}}),
    (6, "step_completed", "eu-load", EU, {"output": "eu"}),
    (6, "step_started", "eu-check", EU, {"type": "wait"}),
    (9, "step_started", "us-load", US, {"type": "action", "attempt": 2}),
    (12, "step_completed", "us-load", US, {"output": "us"}),
    (12, "branch_completed", "fan-out", US, {"branch": "us"}),
)


def test_parallel_branches_become_lanes_under_their_parallel_step():
    steps = derive_steps(PARALLEL_RUN, T0 + timedelta(seconds=20))
    shown = [(row.node_id, row.lane, row.status, row.attempts) for row in steps.rows]
    assert shown == [
        ("prepare", (), "completed", 1),
        ("fan-out", (), "running", 1),
        ("eu-load", ("fan-out/eu",), "completed", 1),
        ("eu-check", ("fan-out/eu",), "waiting", 1),
        ("us-load", ("fan-out/us",), "completed", 2),
    ]
    prepare, fan_out, _eu_load, eu_check, us_load = steps.rows
    assert prepare.output == {"rows": 3} and prepare.duration(T0) == timedelta(seconds=2)
    assert us_load.started_at == T0 + timedelta(seconds=2)
    assert us_load.ended_at == T0 + timedelta(seconds=12) and us_load.output == "us"
    assert eu_check.ended_at is None and eu_check.lane_label == "fan-out/eu"
    assert fan_out.depth == 0 and us_load.depth == 1
    assert steps.start == T0 and steps.end == T0 + timedelta(seconds=20)


def test_lanes_follow_the_order_their_branches_started():
    events = history(
        (0, "step_started", "fan-out", None, {"type": "parallel", "branches": ["b1", "b2"]}),
        (0, "branch_started", "fan-out", ["fan-out/b1"], {"branch": "b1", "position": 0}),
        (0, "branch_started", "fan-out", ["fan-out/b2"], {"branch": "b2", "position": 1}),
        (1, "step_started", "b2-load", ["fan-out/b2"], {"type": "action", "attempt": 1}),
        (2, "step_started", "b1-load", ["fan-out/b1"], {"type": "action", "attempt": 1}),
    )
    steps = derive_steps(events, T0 + timedelta(seconds=5))
    assert [row.node_id for row in steps.rows] == ["fan-out", "b1-load", "b2-load"]
    assert [bar.row.node_id for bar in gantt(steps, T0 + timedelta(seconds=5)).bars][1:] == [
        "b1-load",
        "b2-load",
    ]


def test_an_incident_then_a_cancel_ends_the_open_steps_with_the_run():
    events = history(
        (0, "step_started", "charge", None, {"type": "action", "attempt": 1}),
        (1, "step_failed", "charge", None, {"attempt": 1, "will_retry": False, "error": "no"}),
        (1, "incident_opened", "charge", None, {"attempts": 1, "error": {"m": "declined"}}),
        (30, "run_cancelled", None, None, {}),
    )
    (charge,) = derive_steps(events, T0 + timedelta(hours=1)).rows
    assert charge.status == "cancelled" and charge.error == {"m": "declined"}
    assert charge.ended_at == T0 + timedelta(seconds=30)


def test_a_failed_incident_fails_its_step_and_a_held_completion_is_marked():
    events = history(
        (0, "step_started", "a", EU, {"type": "action", "attempt": 1}),
        (0, "step_started", "b", US, {"type": "action", "attempt": 1}),
        (1, "incident_opened", "a", EU, {"attempts": 3, "error": {}}),
        (2, "step_completed", "b", US, {"output": 1, "held": True}),
        (4, "incident_resolved", "a", EU, {"action": "fail"}),
        (4, "run_failed", "a", None, {}),
    )
    a, b = derive_steps(events, T0).rows
    assert (a.status, a.attempts, a.ended_at) == ("failed", 3, T0 + timedelta(seconds=4))
    assert (b.status, b.held) == ("completed", True)


def test_the_gantt_places_bars_on_one_time_axis():
    steps = derive_steps(PARALLEL_RUN, T0 + timedelta(seconds=20))
    chart = gantt(steps, T0 + timedelta(seconds=20))
    assert chart is not None and len(chart.bars) == 5
    prepare, fan_out, eu_load, eu_check, us_load = chart.bars
    assert [bar.y for bar in chart.bars] == [TOP + ROW * i for i in range(5)]
    # Parallel branches start together and overlap in time.
    assert eu_load.x == us_load.x == fan_out.x > prepare.x
    assert us_load.width > eu_load.width and eu_check.x == eu_load.x + eu_load.width
    assert eu_load.label_x > prepare.label_x and eu_load.lane_band and not prepare.lane_band
    assert (prepare.css, eu_check.css) == ("step-completed", "step-waiting")
    assert chart.ticks[0].label == "+0 s" and chart.ticks[-1].label == "+20 s"
    short = derive_steps(PARALLEL_RUN[:3], T0 + timedelta(seconds=2))
    assert [t.label for t in gantt(short, T0 + timedelta(seconds=2)).ticks] == [
        "+0.0 s",
        "+0.5 s",
        "+1.0 s",
        "+1.5 s",
        "+2.0 s",
    ]
    assert gantt(derive_steps([], T0), T0) is None


def test_the_time_axis_is_marked_at_round_offsets():
    # Quarters of the span used to read +1 h 1 min, +2 h 3 min, +3 h 4 min for a 4 h 6 min run.
    def labels(span: float) -> list[str]:
        return [tick_label(at, span) for at in tick_offsets(span)]

    assert labels(4 * 3600 + 6 * 60) == ["+0 s", "+2 h", "+4 h"]
    assert labels(3 * 3600 + 50 * 60) == ["+0 s", "+1 h", "+2 h", "+3 h"]
    assert labels(6300) == ["+0 s", "+30 min", "+1 h", "+1 h 30 min"]
    assert labels(25 * 60) == ["+0 s", "+10 min", "+20 min"]
    assert labels(75) == ["+0 s", "+20 s", "+40 s", "+1 min"]
    assert labels(7.5) == ["+0.0 s", "+2.0 s", "+4.0 s", "+6.0 s"]
    assert labels(1.0) == ["+0.0 s", "+0.5 s", "+1.0 s"]
    # Every mark lies on the chart.
    for span in (1.0, 13.7, 599.0, 86400 * 3.3, 86400 * 2000):
        offsets = tick_offsets(span)
        assert offsets[0] == 0 and offsets[-1] <= span and 2 <= len(offsets) <= 5


def test_short_durations():
    cases = {0: "0 s", 59: "59 s", 60: "1 min", 200: "3 min 20 s", 7500: "2 h 5 min"}
    cases |= {90000: "1 d 1 h", 172800: "2 d"}
    for seconds, text in cases.items():
        assert short_duration(timedelta(seconds=seconds)) == text


def test_tick_labels_name_the_place_they_are_drawn_at():
    assert [tick_label(15 * i / 4, 15) for i in range(5)] == [
        "+0 s",
        "+4 s",
        "+8 s",
        "+11 s",
        "+15 s",
    ]
    assert tick_label(3.75, 7.5) == "+3.8 s"
