"""DST in four zones: gap shift, first fold only, every-hour doubling and gap skip, collisions.

Expected instants are worked out by hand from the 2026 transitions:
- America/New_York: 8 Mar 02:00 -05 -> 03:00 -04 (07:00Z); 1 Nov 02:00 -04 -> 01:00 -05 (06:00Z).
- Australia/Sydney: 5 Apr 03:00 +11 -> 02:00 +10 (16:00Z on 4 Apr);
  4 Oct 02:00 +10 -> 03:00 +11 (16:00Z on 3 Oct).
- Australia/Lord_Howe (30-minute shift): 5 Apr 02:00 +11 -> 01:30 +10:30 (15:00Z on 4 Apr);
  4 Oct 02:00 +10:30 -> 02:30 +11 (15:30Z on 3 Oct).
- America/Santiago (midnight transitions): 5 Apr 00:00 -03 -> 4 Apr 23:00 -04 (03:00Z);
  6 Sep 00:00 -04 -> 01:00 -03 (04:00Z).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.calendar import Spec, next_occurrence, occurrences_between, preview


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fires(expr: str, zone: str, after: str, until: str) -> list[str]:
    spec = Spec(cron_expressions=(expr,), timezone=zone)
    return [t.strftime("%Y-%m-%dT%H:%MZ") for t in occurrences_between(spec, z(after), z(until))]


def chain(expr: str, zone: str, after: str, count: int) -> list[str]:
    spec = Spec(cron_expressions=(expr,), timezone=zone)
    instants, cursor = [], z(after)
    for _ in range(count):
        found = next_occurrence(spec, cursor)
        assert found is not None
        instants.append(found.strftime("%Y-%m-%dT%H:%MZ"))
        cursor = found
    return instants


# The examples in docs/calendar.md, verbatim.


def test_new_york_named_hour_in_the_gap_shifts_to_the_end_of_the_gap() -> None:
    expected = ["2026-03-07T07:30Z", "2026-03-08T07:00Z", "2026-03-09T06:30Z"]
    assert fires("30 2 * * *", "America/New_York", "2026-03-07T00:00Z", "2026-03-10T00:00Z") == (
        expected
    )
    assert chain("30 2 * * *", "America/New_York", "2026-03-07T00:00Z", 3) == expected


def test_new_york_named_hour_in_the_fold_fires_only_the_first_occurrence() -> None:
    expected = ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]
    assert fires("30 1 * * *", "America/New_York", "2026-10-31T12:00Z", "2026-11-02T12:00Z") == (
        expected
    )
    assert chain("30 1 * * *", "America/New_York", "2026-10-31T12:00Z", 2) == expected
    # Even asked from inside the repeated hour, the second 01:30 (06:30Z) never fires.
    assert chain("30 1 * * *", "America/New_York", "2026-11-01T06:15Z", 1) == ["2026-11-02T06:30Z"]


def test_new_york_every_hour_follows_absolute_time() -> None:
    assert fires("0 * * * *", "America/New_York", "2026-11-01T03:30Z", "2026-11-01T07:30Z") == [
        "2026-11-01T04:00Z",
        "2026-11-01T05:00Z",
        "2026-11-01T06:00Z",
        "2026-11-01T07:00Z",
    ]
    assert fires("0 * * * *", "America/New_York", "2026-03-08T05:30Z", "2026-03-08T07:30Z") == [
        "2026-03-08T06:00Z",
        "2026-03-08T07:00Z",
    ]


def test_new_york_collisions_fire_once() -> None:
    # 02:00 and 02:30 shift to 03:00, which also matches for real: one instant.
    assert fires(
        "0,30 2,3 * * *", "America/New_York", "2026-03-08T00:00Z", "2026-03-08T12:00Z"
    ) == [
        "2026-03-08T07:00Z",
        "2026-03-08T07:30Z",
    ]


@pytest.mark.parametrize(
    ("zone", "hours_on_day", "start", "end"),
    [
        ("America/New_York", 23, "2026-03-08T04:59Z", "2026-03-09T03:59Z"),
        ("America/New_York", 25, "2026-11-01T03:59Z", "2026-11-02T04:59Z"),
        ("Australia/Sydney", 23, "2026-10-03T13:59Z", "2026-10-04T12:59Z"),
        ("Australia/Sydney", 25, "2026-04-04T12:59Z", "2026-04-05T13:59Z"),
    ],
)
def test_every_hour_fires_once_per_real_hour(
    zone: str, hours_on_day: int, start: str, end: str
) -> None:
    # The window (after, until] is exactly the local day: 23 real hours in spring, 25 in autumn.
    instants = fires("0 * * * *", zone, start, end)
    assert len(instants) == hours_on_day
    assert len(set(instants)) == hours_on_day


def test_named_hours_on_the_gap_day_collapse_the_missing_hour() -> None:
    # Hours 0-22 named: 02:00 shifts onto the real 03:00, so 22 instants.
    instants = fires("0 0-22 * * *", "America/New_York", "2026-03-08T04:59Z", "2026-03-09T03:59Z")
    assert len(instants) == 22
    assert instants[:3] == ["2026-03-08T05:00Z", "2026-03-08T06:00Z", "2026-03-08T07:00Z"]


# Southern hemisphere: Australia/Sydney.


def test_sydney_gap_shift() -> None:
    assert fires("30 2 * * *", "Australia/Sydney", "2026-10-02T00:00Z", "2026-10-05T00:00Z") == [
        "2026-10-02T16:30Z",
        "2026-10-03T16:00Z",
        "2026-10-04T15:30Z",
    ]


def test_sydney_fold_first_only() -> None:
    assert fires("30 2 * * *", "Australia/Sydney", "2026-04-03T00:00Z", "2026-04-06T00:00Z") == [
        "2026-04-03T15:30Z",
        "2026-04-04T15:30Z",
        "2026-04-05T16:30Z",
    ]


def test_sydney_every_hour_doubles_the_repeated_hour() -> None:
    assert fires("30 * * * *", "Australia/Sydney", "2026-04-04T14:00Z", "2026-04-04T17:00Z") == [
        "2026-04-04T14:30Z",
        "2026-04-04T15:30Z",
        "2026-04-04T16:30Z",
    ]
    notes = [
        item.note
        for item in preview(
            Spec(("30 * * * *",), timezone="Australia/Sydney"), z("2026-04-04T15:00Z"), 3
        )
    ]
    assert notes == [
        "repeated: 02:30 occurs twice on this day (first occurrence)",
        "second occurrence of 02:30 (clock fell back)",
        None,
    ]


def test_sydney_collisions_fire_once() -> None:
    assert fires(
        "0,30 2,3 * * *", "Australia/Sydney", "2026-10-03T12:00Z", "2026-10-04T00:00Z"
    ) == [
        "2026-10-03T16:00Z",
        "2026-10-03T16:30Z",
    ]


# 30-minute shift: Australia/Lord_Howe.


def test_lord_howe_gap_shifts_to_the_first_instant_after_a_half_hour_gap() -> None:
    # 02:15 does not exist on 4 Oct; the clock reads 02:30 +11 right after the gap.
    assert fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-02T00:00Z", "2026-10-05T00:00Z") == [
        "2026-10-02T15:45Z",
        "2026-10-03T15:30Z",
        "2026-10-04T15:15Z",
    ]


def test_lord_howe_fold_first_only() -> None:
    assert fires("45 1 * * *", "Australia/Lord_Howe", "2026-04-03T00:00Z", "2026-04-06T00:00Z") == [
        "2026-04-03T14:45Z",
        "2026-04-04T14:45Z",
        "2026-04-05T15:15Z",
    ]


def test_lord_howe_every_hour_doubles_the_repeated_half_hour() -> None:
    # 01:45 +11 (14:45Z), then the clock falls back to 01:30 and 01:45 +10:30 (15:15Z) recurs.
    assert fires("45 * * * *", "Australia/Lord_Howe", "2026-04-04T13:30Z", "2026-04-04T16:30Z") == [
        "2026-04-04T13:45Z",
        "2026-04-04T14:45Z",
        "2026-04-04T15:15Z",
        "2026-04-04T16:15Z",
    ]


def test_lord_howe_every_hour_skips_minutes_inside_the_gap() -> None:
    # 01:15 +10:30 (14:45Z); 02:15 does not exist; next is 03:15 +11 (16:15Z).
    assert fires("15 * * * *", "Australia/Lord_Howe", "2026-10-03T14:00Z", "2026-10-03T16:30Z") == [
        "2026-10-03T14:45Z",
        "2026-10-03T16:15Z",
    ]


def test_lord_howe_collisions_fire_once() -> None:
    # 02:00 and 02:15 shift to 02:30 +11, which is also a real match of minute 30.
    assert fires(
        "0,15,30 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00Z", "2026-10-04T16:00Z"
    ) == ["2026-10-03T15:30Z", "2026-10-04T15:00Z", "2026-10-04T15:15Z", "2026-10-04T15:30Z"]


# Transitions at midnight: America/Santiago.


def test_santiago_missing_midnight_shifts_to_one_oclock() -> None:
    assert fires("0 0 * * *", "America/Santiago", "2026-09-05T00:00Z", "2026-09-08T00:00Z") == [
        "2026-09-05T04:00Z",
        "2026-09-06T04:00Z",
        "2026-09-07T03:00Z",
    ]


def test_santiago_fold_before_midnight() -> None:
    assert fires("30 23 * * *", "America/Santiago", "2026-04-03T12:00Z", "2026-04-07T00:00Z") == [
        "2026-04-04T02:30Z",
        "2026-04-05T02:30Z",
        "2026-04-06T03:30Z",
    ]
    assert fires("30 * * * *", "America/Santiago", "2026-04-05T02:00Z", "2026-04-05T05:00Z") == [
        "2026-04-05T02:30Z",
        "2026-04-05T03:30Z",
        "2026-04-05T04:30Z",
    ]


def test_results_are_utc_aware() -> None:
    found = next_occurrence(
        Spec(("30 2 * * *",), timezone="America/New_York"), z("2026-03-08T00:00Z")
    )
    assert found == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    assert found is not None and found.tzinfo is UTC
