"""Durations, time zones and instants (docs/calendar.md): accepted and rejected forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.calendar import (
    CalendarError,
    Spec,
    format_duration,
    format_utc,
    next_occurrence,
    parse_duration,
    parse_instant,
    validate_timezone,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P1W", timedelta(weeks=1)),
        ("P1D", timedelta(days=1)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("PT90S", timedelta(seconds=90)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("PT0S", timedelta(0)),
        ("P2W3D", timedelta(days=17)),
        ("P1DT1H1M1S", timedelta(days=1, hours=1, minutes=1, seconds=1)),
        ("PT36H", timedelta(hours=36)),
    ],
)
def test_parse_duration_accepts(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("P1Y", "years and months"),
        ("P1M", "years and months"),
        ("P1Y2M3D", "years and months"),
        ("PT1.5S", "fractions"),
        ("PT0,5H", "fractions"),
        ("P", "not an ISO-8601 duration"),
        ("PT", "not an ISO-8601 duration"),
        ("P1DT", "not an ISO-8601 duration"),
        ("", "not an ISO-8601 duration"),
        ("1H", "not an ISO-8601 duration"),
        ("pt1h", "not an ISO-8601 duration"),
        ("-PT1H", "not an ISO-8601 duration"),
        ("PT-1H", "not an ISO-8601 duration"),
        ("PT1M1H", "not an ISO-8601 duration"),
        ("P1H", "not an ISO-8601 duration"),
        (" PT1H", "not an ISO-8601 duration"),
        ("PT1234567890S", "not an ISO-8601 duration"),
        ("P999999999W", "too long"),
    ],
)
def test_parse_duration_rejects(text: str, fragment: str) -> None:
    with pytest.raises(CalendarError) as caught:
        parse_duration(text, ("every",))
    assert fragment in caught.value.msg
    assert caught.value.loc == ("every",)


def test_parse_duration_rejects_non_strings() -> None:
    with pytest.raises(CalendarError):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "PT0S"),
        (timedelta(hours=1, minutes=30), "PT1H30M"),
        (timedelta(days=1), "P1D"),
        (timedelta(days=7), "P1W"),
        (timedelta(days=8), "P8D"),
        (timedelta(days=7, hours=1), "P7DT1H"),
        (timedelta(seconds=90), "PT1M30S"),
        (timedelta(days=1, seconds=5), "P1DT5S"),
        (timedelta(milliseconds=1500), "PT1.5S"),
    ],
)
def test_format_duration(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
    if value.microseconds == 0:
        assert parse_duration(text) == value


def test_format_duration_rejects_negative() -> None:
    with pytest.raises(ValueError):
        format_duration(timedelta(seconds=-1))


@pytest.mark.parametrize(
    "name",
    [
        "UTC",
        "America/New_York",
        "Australia/Lord_Howe",
        "America/Argentina/Buenos_Aires",
        "Etc/GMT+5",
        "America/Port-au-Prince",
    ],
)
def test_validate_timezone_accepts_iana_names(name: str) -> None:
    assert validate_timezone(name).key == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Mars/Olympus_Mons",
        "America",
        "../etc/passwd",
        "/etc/localtime",
        "localtime",
        "posixrules",
        "right/UTC",
        "posix/UTC",
        "America/New York",
        "UTC ",
        None,
        5,
    ],
)
def test_validate_timezone_rejects(name: object) -> None:
    with pytest.raises(CalendarError) as caught:
        validate_timezone(name)  # type: ignore[arg-type]
    assert caught.value.loc == ("timezone",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-08T07:00:00Z", datetime(2026, 3, 8, 7, tzinfo=UTC)),
        ("2026-03-08T03:00:00-04:00", datetime(2026, 3, 8, 7, tzinfo=UTC)),
        ("2026-03-08T12:30:00+05:30", datetime(2026, 3, 8, 7, tzinfo=UTC)),
        ("2026-03-08T07:00:00.250000+00:00", datetime(2026, 3, 8, 7, 0, 0, 250000, tzinfo=UTC)),
        # RFC 3339 takes the lower-case letters and a space; upper and lower case alike.
        ("2026-03-08t07:00:00z", datetime(2026, 3, 8, 7, tzinfo=UTC)),
        ("2026-03-08 07:00:00Z", datetime(2026, 3, 8, 7, tzinfo=UTC)),
        ("2026-03-08T07:00:00.0000009Z", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ],
)
def test_parse_instant(text: str, expected: datetime) -> None:
    parsed = parse_instant(text, ("after",))
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-08T07:00:00",
        "2026-03-08",
        "yesterday",
        "",
        None,
        1741417200,
        # Python's reader takes these; ISO-8601 does not.
        "2026-03-08T07:00:00 Z",
        "2026-03-08T07:00:00 +01:00",
        "2026-03-08T07:00:00.Z",
        "2026-03-08X07:00:00Z",
    ],
)
def test_parse_instant_rejects(text: object) -> None:
    with pytest.raises(CalendarError) as caught:
        parse_instant(text, ("start_at",))  # type: ignore[arg-type]
    assert caught.value.loc == ("start_at",)


def test_format_utc() -> None:
    assert format_utc(datetime(2026, 3, 8, 7, tzinfo=UTC)) == "2026-03-08T07:00:00Z"
    assert format_utc(parse_instant("2026-03-08T03:00:00-04:00")) == "2026-03-08T07:00:00Z"
    assert format_utc(datetime(2026, 3, 8, 7, 0, 0, 5, tzinfo=UTC)) == "2026-03-08T07:00:00.000005Z"


def test_digits_finer_than_a_microsecond_round_up_for_a_lower_bound() -> None:
    """Dropped, they moved `start_at` (or a backfill's `from`) 100 ns earlier, onto an
    occurrence before it; a lower bound rounds up to the next microsecond instead."""
    up = parse_instant("2026-03-08T07:00:00.0000001Z", ("start_at",), round_up=True)
    assert up == datetime(2026, 3, 8, 7, 0, 0, 1, tzinfo=UTC)
    exact = parse_instant("2026-03-08T07:00:00.1234560000Z", round_up=True)
    assert exact == datetime(2026, 3, 8, 7, 0, 0, 123456, tzinfo=UTC)
    assert parse_instant("2026-03-08T07:00:00.9999999Z") == datetime(
        2026, 3, 8, 7, 0, 0, 999999, tzinfo=UTC
    )


def test_the_same_instant_as_both_bounds_stays_one_instant() -> None:
    """`start_at` rounds up and `end_at` down: given the same instant with finer digits, they
    crossed and the spec was refused (end_at before start_at), where equal bounds are allowed."""
    bound = "2031-01-01T03:00:00.0000001Z"
    spec = Spec.from_dict({"cron_expressions": ["0 3 * * *"], "start_at": bound, "end_at": bound})
    assert spec.start_at == spec.end_at == datetime(2031, 1, 1, 3, 0, 0, 1, tzinfo=UTC)
    # The instant itself is not a whole second: no occurrence falls in the window.
    assert next_occurrence(spec, datetime(2030, 1, 1, tzinfo=UTC)) is None
    same = {"start_at": "2031-01-01T04:00:00.0000001+01:00", "end_at": bound}
    assert Spec.from_dict({"cron": "0 3 * * *", **same}).start_at == spec.start_at
    with pytest.raises(CalendarError) as caught:
        Spec.from_dict({"cron": "0 3 * * *", "start_at": bound, "end_at": "2031-01-01T03:00:00Z"})
    assert caught.value.loc == ("end_at",)
