"""`describe_spec` read by a person: 40 specs and the text the console shows for each."""

from __future__ import annotations

from typing import Any

import pytest

from app.calendar import Spec, describe_spec
from app.calendar.describe import zone_note

TABLE: list[tuple[dict[str, Any], str]] = [
    # Minutes and hours.
    ({"cron": "* * * * *"}, "every minute"),
    ({"cron": "*/1 * * * *"}, "every minute"),
    ({"cron": "*/5 * * * *"}, "every 5 minutes"),
    ({"cron": "*/15 * * * *"}, "every 15 minutes"),
    ({"cron": "0,30 * * * *"}, "every 30 minutes"),
    ({"cron": "0 * * * *"}, "every hour"),
    ({"cron": "30 * * * *"}, "every hour at minute 30"),
    ({"cron": "10,20 * * * *"}, "every hour at minutes 10 and 20"),
    ({"cron": "0 */6 * * *"}, "every 6 hours at minute 0"),
    ({"cron": "15 */2 * * *"}, "every 2 hours at minute 15"),
    ({"cron": "0 */1 * * *"}, "every hour"),
    ({"cron": "0 2 * * *"}, "at 02:00 every day"),
    ({"cron": "0 0,12 * * *"}, "at 00:00 and 12:00 every day"),
    ({"cron": "5,35 1,13 * * *"}, "at 01:05, 01:35, 13:05 and 13:35 every day"),
    ({"cron": "* 9 * * *"}, "every minute from 09:00 to 09:59"),
    ({"cron": "0 9-17 * * *"}, "every hour from 09:00 to 17:00"),
    ({"cron": "30 9-17 * * *"}, "every hour from 09:30 to 17:30"),
    ({"cron": "*/15 9-17 * * 1-5"}, "every 15 minutes from 09:00 to 17:59 on Monday–Friday"),
    (
        {"cron": "7 1,5,9,13,17,21,23 * * *"},
        "at minute 7 past hours 1, 5, 9, 13, 17, 21 and 23 every day",
    ),
    # Days of the week and of the month, months.
    ({"cron": "30 9 * * 1-5"}, "at 09:30 on Monday–Friday"),
    ({"cron": "0 9 * * 1"}, "at 09:00 on Monday"),
    ({"cron": "0 9 * * 0,6"}, "at 09:00 on Sunday and Saturday"),
    ({"cron": "0 9 * * 1,3,5"}, "at 09:00 on Monday, Wednesday and Friday"),
    (
        {"cron": "0 9-17/2 * * 0,6"},
        "at 09:00, 11:00, 13:00, 15:00 and 17:00 on Sunday and Saturday",
    ),
    ({"cron": "30 2 1 * *"}, "at 02:30 on the 1st of every month"),
    ({"cron": "0 0 1 1 *"}, "at 00:00 on the 1st of January"),
    ({"cron": "0 0 1,15 * *"}, "at 00:00 on the 1st and 15th of every month"),
    ({"cron": "0 0 1-7 * *"}, "at 00:00 on the 1st–7th of every month"),
    ({"cron": "0 0 2,3,22 * *"}, "at 00:00 on the 2nd, 3rd and 22nd of every month"),
    ({"cron": "0 0 11,12,13,31 * *"}, "at 00:00 on the 11th–13th and 31st of every month"),
    ({"cron": "0 0 * 1,7 *"}, "at 00:00 every day in January and July"),
    ({"cron": "0 12 * 6-8 1-5"}, "at 12:00 on Monday–Friday in June–August"),
    # Time zones.
    (
        {"cron": "30 2 * * *", "timezone": "America/New_York"},
        "at 02:30 every day (America/New_York)",
    ),
    (
        {"cron": "0 9 * * *", "timezone": "EST"},
        "at 09:00 every day (EST, a fixed offset without daylight saving time)",
    ),
    # Intervals, several calendars, bounds.
    ({"intervals": [{"every": "PT15M"}]}, "every 15 minutes"),
    ({"intervals": [{"every": "PT1H"}]}, "every hour"),
    ({"intervals": [{"every": "PT6H", "offset": "PT5M"}]}, "every 6 hours, offset 5 minutes"),
    ({"intervals": [{"every": "PT90M"}]}, "every 90 minutes"),
    (
        {"intervals": [{"every": "P2W"}, {"every": "P1D", "offset": "PT1H"}]},
        "every 2 weeks; every day, offset 1 hour",
    ),
    (
        {
            "cron_expressions": ["0 2 * * *", "0 14 * * 0"],
            "intervals": [{"every": "PT30M"}],
            "end_at": "2027-01-01T00:00Z",
        },
        "at 02:00 every day; at 14:00 on Sunday; every 30 minutes, until 2027-01-01T00:00:00Z",
    ),
]


@pytest.mark.parametrize(("data", "text"), TABLE, ids=[text for _, text in TABLE])
def test_describe_spec_reads_as_a_person_would_say_it(data: dict[str, Any], text: str) -> None:
    assert describe_spec(Spec.from_dict(data)) == text


def test_the_table_holds_forty_specs_and_none_reads_like_a_machine() -> None:
    assert len(TABLE) == 40
    for data, _ in TABLE:
        text = describe_spec(Spec.from_dict(data))
        for machine in ("PT", "every 1 ", "past hour */", "on day ", "*/"):
            assert machine not in text, (data, text)


def test_fixed_offset_zones_get_a_daylight_saving_note() -> None:
    note = zone_note("EST")
    assert note is not None and "never observes daylight saving time" in note
    assert "UTC−05:00" in note and "America/New_York" in note
    assert zone_note("Etc/GMT-3") is not None
    for zone in ("UTC", "America/New_York", "Europe/Berlin", "EST5EDT", "Asia/Tokyo"):
        assert zone_note(zone) is None, zone
