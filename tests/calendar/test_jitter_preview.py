"""Jitter and preview (docs/calendar.md)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.calendar import (
    CalendarError,
    Spec,
    due_time,
    jitter_offset,
    next_occurrence,
    preview,
)

ROOT = Path(__file__).resolve().parents[2]
T = datetime(2026, 3, 8, 7, tzinfo=UTC)


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# Jitter.


def test_jitter_is_a_pinned_function_of_uid_and_occurrence() -> None:
    # Pinned values: changing the hash would move every replica's due times at deploy.
    assert jitter_offset("sch-0001", T, 600, None) == timedelta(seconds=418)
    assert jitter_offset("sch-0002", T, 600, None) == timedelta(seconds=152)
    assert jitter_offset("sch-0001", T, 3600, None) == timedelta(seconds=1316)
    assert jitter_offset("sch-0001", T + timedelta(minutes=1), 600, None) == timedelta(seconds=247)


def test_jitter_is_identical_in_another_process_with_another_hash_seed() -> None:
    code = (
        "from datetime import datetime, UTC;"
        "from app.calendar import jitter_offset;"
        "print(jitter_offset('sch-0001', datetime(2026, 3, 8, 7, tzinfo=UTC), 600, None)"
        ".total_seconds())"
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert output.strip() == "418.0"


def test_jitter_spreads_across_uids_within_bounds() -> None:
    offsets = [jitter_offset(f"uid-{n}", T, 600, None) for n in range(200)]
    assert all(timedelta(0) <= offset <= timedelta(seconds=600) for offset in offsets)
    assert len(set(offsets)) > 150
    assert max(offsets) > timedelta(seconds=500) and min(offsets) < timedelta(seconds=100)


def test_jitter_zero_is_zero() -> None:
    assert jitter_offset("uid", T, 0, None) == timedelta(0)
    assert jitter_offset("uid", T, 0, T + timedelta(seconds=1)) == timedelta(0)


def test_jitter_is_capped_strictly_before_the_next_occurrence() -> None:
    for n in range(50):
        offset = jitter_offset(f"uid-{n}", T, 3600, T + timedelta(seconds=30))
        assert offset <= timedelta(seconds=29)
    assert jitter_offset("uid-1", T, 3600, T + timedelta(seconds=1)) == timedelta(0)
    assert jitter_offset("uid-1", T, 3600, T + timedelta(seconds=1, microseconds=1)) <= (
        timedelta(seconds=1)
    )


@pytest.mark.parametrize("bad", [-1, 3601, True, 1.5, "10"])
def test_jitter_seconds_must_be_in_range(bad: object) -> None:
    with pytest.raises(CalendarError) as caught:
        jitter_offset("uid", T, bad, None)  # type: ignore[arg-type]
    assert caught.value.loc == ("jitter_seconds",)


def test_due_time_stays_before_the_next_canonical_occurrence() -> None:
    spec = Spec.from_dict({"cron": "* * * * *"})
    for n in range(30):
        occurrence = T + timedelta(minutes=n)
        due = due_time(spec, f"uid-{n}", 3600, occurrence)
        assert occurrence <= due < occurrence + timedelta(minutes=1)
    assert due_time(spec, "uid", 0, T) == T


def test_due_time_of_the_last_occurrence_is_not_capped() -> None:
    spec = Spec.from_dict({"cron": "* * * * *", "end_at": "2026-03-08T07:00:00Z"})
    assert next_occurrence(spec, T) is None
    assert due_time(spec, "sch-0001", 600, T) == T + timedelta(seconds=418)


# Preview.


def test_preview_matches_the_api_example() -> None:
    spec = Spec.from_dict({"cron": "30 2 * * *", "timezone": "America/New_York"})
    items = preview(spec, z("2026-03-07T12:00:00Z"), 2)
    assert [item.to_dict() for item in items] == [
        {
            "at": "2026-03-08T07:00:00Z",
            "local": "2026-03-08T03:00:00-04:00",
            "utc_offset": "-04:00",
            "note": "shifted: 02:30 does not exist on this day",
        },
        {
            "at": "2026-03-09T06:30:00Z",
            "local": "2026-03-09T02:30:00-04:00",
            "utc_offset": "-04:00",
            "note": None,
        },
    ]
    assert items[0].canonical == items[0].at


def test_preview_notes_for_folds() -> None:
    every_hour = Spec.from_dict({"cron": "30 * * * *", "timezone": "America/New_York"})
    notes = [(i.to_dict()["at"], i.note) for i in preview(every_hour, z("2026-11-01T05:00Z"), 3)]
    assert notes == [
        ("2026-11-01T05:30:00Z", "repeated: 01:30 occurs twice on this day (first occurrence)"),
        ("2026-11-01T06:30:00Z", "second occurrence of 01:30 (clock fell back)"),
        ("2026-11-01T07:30:00Z", None),
    ]
    named = Spec.from_dict({"cron": "30 1 * * *", "timezone": "America/New_York"})
    first = preview(named, z("2026-11-01T00:00Z"), 1)[0]
    assert first.to_dict()["at"] == "2026-11-01T05:30:00Z"
    assert (
        first.note
        == "repeated: 01:30 occurs twice on this day (fires at the first occurrence only)"
    )


def test_preview_note_lists_all_shifted_times_of_a_collision() -> None:
    spec = Spec.from_dict({"cron": "0,30 2,3 * * *", "timezone": "America/New_York"})
    first = preview(spec, z("2026-03-08T00:00Z"), 1)[0]
    assert first.to_dict() == {
        "at": "2026-03-08T07:00:00Z",
        "local": "2026-03-08T03:00:00-04:00",
        "utc_offset": "-04:00",
        "note": "shifted: 02:00, 02:30 do not exist on this day",
    }


def test_preview_offsets_in_other_zones() -> None:
    kolkata = preview(Spec.from_dict({"cron": "0 9 * * *", "timezone": "Asia/Kolkata"}), T, 1)[0]
    assert kolkata.to_dict() == {
        "at": "2026-03-09T03:30:00Z",
        "local": "2026-03-09T09:00:00+05:30",
        "utc_offset": "+05:30",
        "note": None,
    }
    utc = preview(Spec.from_dict({"intervals": [{"every": "PT1H"}]}), T, 1)[0]
    assert utc.to_dict()["local"] == "2026-03-08T08:00:00+00:00"
    assert utc.utc_offset == "+00:00"


def test_preview_with_jitter_lists_occurrences_strictly_after() -> None:
    spec = Spec.from_dict({"cron": "*/5 * * * *"})
    after = T + timedelta(seconds=30)
    items = preview(spec, after, 20, uid="sch-0001", jitter_seconds=240)
    assert len(items) == 20
    assert all(item.at > after for item in items)
    assert all(item.canonical <= item.at < item.canonical + timedelta(minutes=5) for item in items)
    assert [item.at for item in items] == sorted({item.at for item in items})
    # The 07:00 occurrence would be due at 07:01:20 with this uid, after `after`; but a schedule
    # saved at `after` never fires it (its cursor starts there), so the preview leaves it out.
    assert preview(spec, T - timedelta(seconds=1), 1, uid="sch-0001", jitter_seconds=240)[
        0
    ].at == T + timedelta(seconds=80)
    assert all(item.canonical > after for item in items)
    assert items[0].canonical == T + timedelta(minutes=5)


@pytest.mark.parametrize("count", [0, 101, -1, True, "5", 2.0])
def test_preview_count_bounds(count: object) -> None:
    spec = Spec.from_dict({"cron": "* * * * *"})
    with pytest.raises(CalendarError) as caught:
        preview(spec, T, count)  # type: ignore[arg-type]
    assert caught.value.loc == ("count",)


def test_preview_returns_at_most_what_exists() -> None:
    spec = Spec.from_dict({"cron": "* * * * *", "end_at": "2026-03-08T07:03:00Z"})
    assert len(preview(spec, T, 100)) == 3
    assert len(preview(Spec.from_dict({"cron": "* * * * *"}), T, 100)) == 100


def test_the_last_occurrence_before_the_end_of_year_9000_is_jittered_within_it() -> None:
    """The last occurrence has no next one to cap its jitter: it was announced after
    9000-12-31T23:59:59Z, which no clock reaches, and never fired."""
    spec = Spec.from_dict({"cron": "50 23 31 12 *"})
    end = datetime(9000, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    items = preview(spec, datetime(9000, 12, 31, 23, 30, tzinfo=UTC), 5, uid="z7",
                    jitter_seconds=3600)  # fmt: skip
    assert [item.canonical for item in items] == [datetime(9000, 12, 31, 23, 50, tzinfo=UTC)]
    assert items[0].at <= end
    assert jitter_offset("any", datetime(9000, 12, 31, 23, 59, 30, tzinfo=UTC), 3600, None) <= (
        timedelta(seconds=29)
    )
