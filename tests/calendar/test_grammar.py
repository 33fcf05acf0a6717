"""Every accepted and rejected form of the cron grammar, with the field each error names."""

from __future__ import annotations

import pytest

from app.calendar import CalendarError, Spec, validate_calendar

LIST_OF_32 = ",".join(str(minute) for minute in range(32))
LIST_OF_33 = ",".join(str(minute) for minute in range(33))


@pytest.mark.parametrize(
    "expr",
    [
        "* * * * *",
        "*/15 * * * *",
        "0 9-17/2 * * 1-5",
        "5 4 * * 0",
        "0 0 * * 6",
        "0 0 29 2 *",
        "0 0 30 1,2 *",
        "0 0 31 1-12 *",
        "59 23 31 12 *",
        "0-59 0-23 1-31 1-12 *",
        "00 05 01 01 *",
        "1-1 * * * *",
        "*/60 */24 */31 */12 *",
        "0 0 * * */7",
        "0 0 * 2 1",
        "0 12 1,15 */3 *",
        f"{LIST_OF_32} * * * *",
        "0,30 2,3 * * *",
        "  0  2 * *   *  ",
    ],
)
def test_accepted(expr: str) -> None:
    validate_calendar(expr)


@pytest.mark.parametrize(
    ("expr", "field", "fragment"),
    [
        # Shape: five fields, spaces only, no macros, bounded length.
        ("", None, "expected 5 fields"),
        ("* * * *", None, "got 4"),
        ("0 * * * * *", None, "seconds and year fields are not allowed"),
        ("0 0 0 * * * 2026", None, "got 7"),
        ("@daily", None, "macros"),
        ("@reboot", None, "macros"),
        ("0\t0 * * *", None, "separated by spaces"),
        ("0 0 * * *\n", None, "separated by spaces"),
        ("0 0 * * *" + " " * 248, None, "longer than 256"),
        # Names, special characters, random and hash syntax.
        ("0 0 * * MON", "day of week", "names are not allowed"),
        ("0 0 * JAN *", "month", "names are not allowed"),
        ("0 0 * * mon-fri", "day of week", "names are not allowed"),
        ("0 0 ? * *", "day of month", "'?' is not supported"),
        ("0 0 * * ?", "day of week", "'?' is not supported"),
        ("0 0 L * *", "day of month", "'L' is not supported"),
        ("0 0 15W * *", "day of month", "'W' is not supported"),
        ("0 0 LW * *", "day of month", "'LW' is not supported"),
        ("0 0 * * 5L", "day of week", "'L' is not supported"),
        ("0 0 * * 5#3", "day of week", "'#' is not supported"),
        ("H * * * *", "minute", "'H' is not supported"),
        ("H(0-29) * * * *", "minute", "'H' is not supported"),
        ("R * * * *", "minute", "'R' is not supported"),
        ("+5 * * * *", "minute", "'+' is not supported"),
        ("\u0665 * * * *", "minute", "is not supported"),
        # Ranges of values per field; 7 is not Sunday.
        ("0 0 * * 7", "day of week", "7 is out of range 0-6"),
        ("0 0 * * 1-7", "day of week", "7 is out of range 0-6"),
        ("60 * * * *", "minute", "60 is out of range 0-59"),
        ("0 24 * * *", "hour", "24 is out of range 0-23"),
        ("0 0 0 * *", "day of month", "0 is out of range 1-31"),
        ("0 0 32 * *", "day of month", "32 is out of range 1-31"),
        ("0 0 * 0 *", "month", "0 is out of range 1-12"),
        ("0 0 * 13 *", "month", "13 is out of range 1-12"),
        ("000 * * * *", "minute", "more than two digits"),
        ("0 100 * * *", "hour", "more than two digits"),
        # Ranges, lists and steps.
        ("0 22-2 * * *", "hour", "range 22-2 is reversed"),
        ("5/15 * * * *", "minute", "a step needs '*' or a range"),
        ("*/0 * * * *", "minute", "step 0 is out of range 1-60"),
        ("0 */25 * * *", "hour", "step 25 is out of range 1-24"),
        ("*/ * * * *", "minute", "step '' must be a number"),
        ("*/1/2 * * * *", "minute", "step '1/2' must be a number"),
        ("1-2-3 * * * *", "minute", "expected a number"),
        ("-1 * * * *", "minute", "expected a number"),
        ("1,,2 * * * *", "minute", "empty list term"),
        ("1, * * * *", "minute", "empty list term"),
        (f"{LIST_OF_33} * * * *", "minute", "at most 32 terms"),
        # Day fields: one must be '*', and the calendar must be able to occur.
        ("0 0 1 * 1", "day of month", "at least one of day of month and day of week"),
        ("0 0 */1 * 1", "day of month", "at least one of day of month and day of week"),
        ("0 0 31 2 *", "day of month", "can never occur"),
        ("0 0 30 2 *", "day of month", "can never occur"),
        ("0 0 31 4,6,9,11 *", "day of month", "can never occur"),
        ("0 0 30-31 2 *", "day of month", "can never occur"),
    ],
)
def test_rejected(expr: str, field: str | None, fragment: str) -> None:
    with pytest.raises(CalendarError) as caught:
        validate_calendar(expr)
    error = caught.value
    assert fragment in error.msg
    if field is None:
        assert error.loc == ()
    else:
        assert error.loc == (field,)
        assert error.msg.startswith(f"{field}: ")


def test_day_of_week_seven_message_is_exact() -> None:
    with pytest.raises(CalendarError, match=r"^day of week: 7 is out of range 0-6$"):
        validate_calendar("0 0 * * 7")


def test_impossible_calendar_names_the_largest_day() -> None:
    with pytest.raises(CalendarError) as caught:
        validate_calendar("0 0 31 2 *")
    assert caught.value.msg == (
        "day of month: the calendar can never occur: day 31 does not exist "
        "in the selected months (they have at most 29 days)"
    )


def test_length_limit_is_256_characters() -> None:
    padded = "0" + " " * 248 + "* * * *"
    assert len(padded) == 256
    validate_calendar(padded)
    with pytest.raises(CalendarError, match="longer than 256"):
        validate_calendar(padded + " ")


def test_non_string_is_rejected() -> None:
    with pytest.raises(CalendarError):
        validate_calendar(5)  # type: ignore[arg-type]


def test_spec_error_location_is_relative_to_the_spec() -> None:
    with pytest.raises(CalendarError) as caught:
        Spec.from_dict({"cron_expressions": ["0 0 * * *", "0 0 * * 7"]})
    assert caught.value.loc == ("cron_expressions", 1, "day of week")
    assert caught.value.msg == "day of week: 7 is out of range 0-6"


def test_spec_stores_the_canonical_single_spaced_form() -> None:
    spec = Spec(cron_expressions=("  0   2 * *  * ",))
    assert spec.cron_expressions == ("0 2 * * *",)
