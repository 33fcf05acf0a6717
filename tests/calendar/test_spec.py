"""Specs: parsing, intervals, bounds, merging, and the 50-year SCHEDULE_RANGE check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from app.calendar import (
    CalendarError,
    Interval,
    Spec,
    SpecRangeError,
    check_range,
    next_occurrence,
    occurrences_between,
)


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def between(spec: Spec, after: str, until: str) -> list[str]:
    return [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in occurrences_between(spec, z(after), z(until))]


# Parsing and the canonical form.


def test_from_dict_accepts_the_seed_shorthand_and_returns_the_canonical_form() -> None:
    spec = Spec.from_dict({"cron": "*/5 * * * *", "timezone": "UTC"})
    assert spec.to_dict() == {
        "cron_expressions": ["*/5 * * * *"],
        "intervals": [],
        "timezone": "UTC",
        "start_at": None,
        "end_at": None,
    }


def test_from_dict_full_spec_round_trips() -> None:
    data = {
        "cron_expressions": ["0 2 * * *"],
        "intervals": [{"every": "PT6H", "offset": "PT5M"}, {"every": "P1W"}],
        "timezone": "America/New_York",
        "start_at": "2026-03-08T03:00:00-04:00",
        "end_at": "2026-12-31T23:59:59Z",
    }
    spec = Spec.from_dict(data)
    assert spec.to_dict() == {
        "cron_expressions": ["0 2 * * *"],
        "intervals": [{"every": "PT6H", "offset": "PT5M"}, {"every": "P1W", "offset": "PT0S"}],
        "timezone": "America/New_York",
        "start_at": "2026-03-08T07:00:00Z",
        "end_at": "2026-12-31T23:59:59Z",
    }
    assert spec.start_at == datetime(2026, 3, 8, 7, tzinfo=UTC)
    assert Spec.from_dict(spec.to_dict()) == spec


def test_cron_shorthand_joins_the_list_without_duplicates() -> None:
    spec = Spec.from_dict({"cron_expressions": ["0 9 * * *", "0  9 * * *"], "cron": "30 9 * * *"})
    assert spec.cron_expressions == ("0 9 * * *", "30 9 * * *")


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ("0 0 * * *", ()),
        ({}, ()),
        ({"cron_expressions": [], "intervals": []}, ()),
        ({"cron": "* * * * *", "jitter": 5}, ("jitter",)),
        ({"cron_expressions": "0 0 * * *"}, ("cron_expressions",)),
        ({"cron_expressions": [5]}, ("cron_expressions", 0)),
        ({"cron_expressions": ["0 0 * * *", "60 * * * *"]}, ("cron_expressions", 1, "minute")),
        ({"cron_expressions": ["0 0 * * *", "0 0 * * *", "@daily"]}, ("cron_expressions", 2)),
        ({"cron": "0 0 31 2 *"}, ("cron", "day of month")),
        ({"cron": "0 0 * *"}, ("cron",)),
        ({"cron": ["0 0 * * *"]}, ("cron",)),
        ({"intervals": ["PT1H"]}, ("intervals", 0)),
        ({"intervals": [{"offset": "PT1M"}]}, ("intervals", 0, "every")),
        ({"intervals": [{"every": "PT1H"}, {"every": "P1M"}]}, ("intervals", 1, "every")),
        ({"intervals": [{"every": "PT0S"}]}, ("intervals", 0, "every")),
        ({"intervals": [{"every": "PT1H", "offset": "PT1H"}]}, ("intervals", 0, "offset")),
        ({"intervals": [{"every": "PT1H", "offset": "P1Y"}]}, ("intervals", 0, "offset")),
        ({"intervals": [{"every": "PT1H", "jitter": "PT1S"}]}, ("intervals", 0, "jitter")),
        ({"intervals": {"every": "PT1H"}}, ("intervals",)),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus_Mons"}, ("timezone",)),
        ({"cron": "* * * * *", "timezone": 5}, ("timezone",)),
        ({"cron": "* * * * *", "start_at": "2026-03-08T07:00:00"}, ("start_at",)),
        ({"cron": "* * * * *", "end_at": "tomorrow"}, ("end_at",)),
        ({"cron": "* * * * *", "start_at": "2026-03-08", "end_at": None}, ("start_at",)),
        (
            {
                "cron": "* * * * *",
                "start_at": "2026-03-09T00:00:00Z",
                "end_at": "2026-03-08T00:00Z",
            },
            ("end_at",),
        ),
    ],
)
def test_from_dict_rejects_with_a_location_relative_to_the_spec(data: Any, loc: tuple) -> None:
    with pytest.raises(CalendarError) as caught:
        Spec.from_dict(data)
    assert caught.value.loc == loc


def test_constructor_validates_and_normalises() -> None:
    spec = Spec(
        cron_expressions=["0 2 * * *"],  # type: ignore[arg-type]
        start_at=datetime(2026, 3, 8, 3, tzinfo=timezone(timedelta(hours=-4))),
    )
    assert spec.cron_expressions == ("0 2 * * *",)
    assert spec.start_at == datetime(2026, 3, 8, 7, tzinfo=UTC)
    with pytest.raises(CalendarError) as caught:
        Spec(cron_expressions=("* * * * *",), start_at=datetime(2026, 3, 8))
    assert caught.value.loc == ("start_at",)
    with pytest.raises(CalendarError) as caught:
        Spec(intervals=(Interval(timedelta(hours=1)),), timezone="Nowhere")
    assert caught.value.loc == ("timezone",)


def test_interval_rules() -> None:
    with pytest.raises(CalendarError):
        Interval(timedelta(milliseconds=500))
    with pytest.raises(CalendarError):
        Interval(timedelta(minutes=5), timedelta(minutes=-1))
    assert Interval(timedelta(minutes=5), timedelta(minutes=4, seconds=59)).to_dict() == {
        "every": "PT5M",
        "offset": "PT4M59S",
    }


# Intervals: epoch + offset + k * every, in UTC whatever the zone.


def test_interval_with_offset() -> None:
    spec = Spec.from_dict({"intervals": [{"every": "PT30M", "offset": "PT5M"}]})
    assert between(spec, "2026-03-08T07:00:00Z", "2026-03-08T08:10:00Z") == [
        "2026-03-08T07:05:00Z",
        "2026-03-08T07:35:00Z",
        "2026-03-08T08:05:00Z",
    ]


def test_interval_is_strictly_after_and_counts_from_the_epoch() -> None:
    spec = Spec.from_dict({"intervals": [{"every": "PT90S"}]})
    # 2026-01-01T00:00:00Z is 1767225600 s after the epoch, a multiple of 90.
    assert next_occurrence(spec, z("2026-01-01T00:00:00Z")) == z("2026-01-01T00:01:30Z")
    weekly = Spec.from_dict({"intervals": [{"every": "P1W"}]})
    # The epoch was a Thursday, so weekly intervals land on Thursdays 00:00Z.
    assert next_occurrence(weekly, z("2026-03-08T00:00:00Z")) == z("2026-03-12T00:00:00Z")


def test_interval_ignores_the_time_zone() -> None:
    utc = Spec.from_dict({"intervals": [{"every": "PT1H", "offset": "PT15M"}]})
    kolkata = Spec.from_dict(
        {"intervals": [{"every": "PT1H", "offset": "PT15M"}], "timezone": "Asia/Kolkata"}
    )
    window = ("2026-03-08T00:00:00Z", "2026-03-08T06:00:00Z")
    assert between(utc, *window) == between(kolkata, *window)
    assert between(utc, *window)[0] == "2026-03-08T00:15:00Z"


# Bounds and merging.


def test_start_at_and_end_at_are_inclusive() -> None:
    spec = Spec.from_dict(
        {
            "cron": "0 * * * *",
            "start_at": "2026-03-08T07:00:00Z",
            "end_at": "2026-03-08T09:00:00Z",
        }
    )
    assert next_occurrence(spec, z("2026-03-01T00:00:00Z")) == z("2026-03-08T07:00:00Z")
    assert between(spec, "2026-03-01T00:00:00Z", "2026-03-09T00:00:00Z") == [
        "2026-03-08T07:00:00Z",
        "2026-03-08T08:00:00Z",
        "2026-03-08T09:00:00Z",
    ]
    assert next_occurrence(spec, z("2026-03-08T09:00:00Z")) is None


def test_start_at_between_occurrences() -> None:
    spec = Spec.from_dict({"cron": "0 * * * *", "start_at": "2026-03-08T07:00:00.000001Z"})
    assert next_occurrence(spec, z("2026-03-01T00:00:00Z")) == z("2026-03-08T08:00:00Z")


def test_expressions_and_intervals_merge_and_dedupe() -> None:
    spec = Spec.from_dict(
        {
            "cron_expressions": ["0 */6 * * *", "0 0,12 * * *"],
            "intervals": [{"every": "PT6H"}, {"every": "PT6H", "offset": "PT5M"}],
        }
    )
    assert between(spec, "2026-03-07T23:59:00Z", "2026-03-08T12:05:00Z") == [
        "2026-03-08T00:00:00Z",
        "2026-03-08T00:05:00Z",
        "2026-03-08T06:00:00Z",
        "2026-03-08T06:05:00Z",
        "2026-03-08T12:00:00Z",
        "2026-03-08T12:05:00Z",
    ]
    assert next_occurrence(spec, z("2026-03-08T00:00:00Z")) == z("2026-03-08T00:05:00Z")


def test_expressions_in_the_spec_zone_merge_with_utc_intervals() -> None:
    spec = Spec.from_dict(
        {
            "cron": "30 2 * * *",
            "intervals": [{"every": "P1D", "offset": "PT7H"}],
            "timezone": "America/New_York",
        }
    )
    # The shifted 02:30 (07:00Z on 8 Mar) coincides with the daily 07:00Z interval.
    assert between(spec, "2026-03-07T00:00:00Z", "2026-03-09T12:00:00Z") == [
        "2026-03-07T07:00:00Z",
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
        "2026-03-09T07:00:00Z",
    ]


def test_occurrences_between_is_lazy_and_long_windows_are_cheap() -> None:
    spec = Spec.from_dict({"cron": "* * * * *", "timezone": "Europe/Berlin"})
    instants = list(occurrences_between(spec, z("2026-03-28T00:00:00Z"), z("2026-03-30T00:00Z")))
    assert len(instants) == 2 * 24 * 60
    assert instants == sorted(set(instants))


# SCHEDULE_RANGE.


def test_check_range_accepts_a_spec_that_occurs() -> None:
    check_range(Spec.from_dict({"cron": "0 0 29 2 *"}), z("2026-03-01T00:00:00Z"))
    check_range(
        Spec.from_dict({"cron": "0 0 * * *", "start_at": "2090-01-01T00:00:00Z"}),
        z("2026-03-01T00:00:00Z"),
    )


def test_check_range_rejects_an_end_in_the_past() -> None:
    spec = Spec.from_dict({"cron": "0 0 * * *", "end_at": "2026-01-01T00:00:00Z"})
    with pytest.raises(SpecRangeError, match="in the past"):
        check_range(spec, z("2026-03-01T00:00:00Z"))


def test_check_range_rejects_leap_days_that_end_before_the_next_one() -> None:
    spec = Spec.from_dict({"cron": "0 0 29 2 *", "end_at": "2027-12-31T00:00:00Z"})
    with pytest.raises(SpecRangeError):
        check_range(spec, z("2026-03-01T00:00:00Z"))
    later = Spec.from_dict({"cron": "0 0 29 2 *", "end_at": "2028-03-01T00:00:00Z"})
    check_range(later, z("2026-03-01T00:00:00Z"))
    assert next_occurrence(later, z("2026-03-01T00:00:00Z")) == z("2028-02-29T00:00:00Z")


def test_next_occurrence_gives_up_after_fifty_years() -> None:
    # 20000 days is about 54.8 years: the next one after 2024-10-04 is in 2079.
    spec = Spec.from_dict({"intervals": [{"every": "P20000D"}]})
    assert next_occurrence(spec, z("2026-01-01T00:00:00Z")) is None
    with pytest.raises(SpecRangeError, match="50 years"):
        check_range(spec, z("2026-01-01T00:00:00Z"))
    assert next_occurrence(spec, z("2030-01-01T00:00:00Z")) == z("2079-07-08T00:00:00Z")


def test_leap_day_skips_the_non_leap_century() -> None:
    spec = Spec.from_dict({"cron": "0 12 29 2 *"})
    assert next_occurrence(spec, z("2096-03-01T00:00:00Z")) == z("2104-02-29T12:00:00Z")


def test_naive_instants_are_rejected() -> None:
    spec = Spec.from_dict({"cron": "0 0 * * *"})
    with pytest.raises(CalendarError) as caught:
        next_occurrence(spec, datetime(2026, 1, 1))
    assert caught.value.loc == ("after",)


# The descriptions the console shows are in tests/calendar/test_describe_table.py.
