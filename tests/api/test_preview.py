"""POST /calendar/preview (docs/calendar.md) through the API."""

from __future__ import annotations


def test_preview_new_york_spring_forward(admin_api):
    response = admin_api.post(
        "/namespaces/default/calendar/preview",
        json={
            "spec": {"cron": "30 2 * * *", "timezone": "America/New_York"},
            "after": "2026-03-07T00:00:00Z",
            "count": 3,
        },
    )
    assert response.status_code == 200, response.get_json()
    items = response.get_json()["occurrences"]
    assert [i["at"] for i in items] == [
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
    ]
    assert items[1]["local"] == "2026-03-08T03:00:00-04:00"
    assert items[1]["utc_offset"] == "-04:00"
    assert "02:30 does not exist" in items[1]["note"]
    assert items[0]["note"] is None and items[2]["note"] is None


def test_preview_defaults_to_now_and_namespace_header(api_for):
    viewer = api_for("viewer1", role="viewer", namespace="reports")
    response = viewer.post(
        "/calendar/preview",
        json={"spec": {"cron_expressions": ["0 * * * *"]}, "count": 2},
        headers={"X-Namespace": "reports"},
    )
    assert response.status_code == 200
    assert [i["at"] for i in response.get_json()["occurrences"]] == [
        "2026-01-05T13:00:00Z",
        "2026-01-05T14:00:00Z",
    ]


def test_preview_needs_membership(api_for, accounts):
    accounts.create("owner", role="admin", namespace="billing")
    outsider = api_for("outsider", role="viewer", namespace="reports")
    response = outsider.post(
        "/namespaces/billing/calendar/preview", json={"spec": {"cron": "* * * * *"}}
    )
    # No role in the namespace: answered exactly like a namespace that does not exist.
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "NOT_FOUND"


def test_invalid_calendar_is_422_naming_the_field(admin_api):
    cases = [
        ({"cron": "0 0 * * 7"}, "CALENDAR_INVALID", "day of week"),
        ({"cron_expressions": ["MON * * * *"]}, "CALENDAR_INVALID", "minute"),
        ({"cron": "0 0 31 2 *"}, "CALENDAR_INVALID", "never"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "CALENDAR_INVALID", "timezone"),
        ({"intervals": [{"every": "P1M"}]}, "CALENDAR_INVALID", "every"),
    ]
    for spec, code, needle in cases:
        response = admin_api.post("/calendar/preview", json={"spec": spec})
        assert response.status_code == 422, spec
        error = response.get_json()["error"]
        assert error["code"] == code, spec
        assert needle in error["message"].lower() or needle in str(error["details"]).lower(), error
        assert error["details"]["errors"][0]["loc"][0] == "spec", error


def test_preview_count_bounds(admin_api):
    response = admin_api.post(
        "/calendar/preview", json={"spec": {"cron": "* * * * *"}, "count": 101}
    )
    assert response.status_code == 422
    assert response.get_json()["error"]["details"]["errors"][0]["loc"] == ["count"]


def test_an_empty_after_is_a_bad_instant_not_now(admin_api):
    response = admin_api.post("/calendar/preview", json={"cron": "0 2 * * *", "after": ""})
    assert response.status_code == 422
    assert response.get_json()["error"]["details"]["errors"][0]["loc"] == ["after"]


def test_preview_past_end_at_lists_nothing(admin_api):
    # Preview answers an empty list for an exhausted spec; saving one is 422 SCHEDULE_RANGE
    # (tests/api/test_schedules_errors.py).
    response = admin_api.post(
        "/calendar/preview",
        json={"spec": {"cron": "0 0 * * *", "end_at": "2020-01-01T00:00:00Z"}},
    )
    assert response.status_code == 200
    assert response.get_json()["occurrences"] == []


def test_preview_names_the_schedule_whose_jitter_and_cursor_it_uses(h):
    """`schedule_id` previews what that schedule fires: its own jitter (the preview drew it
    from no schedule at all), from its cursor while the calendar fires alike, and without the
    occurrence a save now would leave behind when it does not."""
    h.create("jx", cron="*/10 * * * *", jitter_seconds=599)  # cursor at 12:00
    h.set_clock("2026-01-05T12:10:01Z")  # 12:10 is due, not ticked
    upcoming = [item["at"] for item in h.read("jx")["upcoming"]]
    assert upcoming[0] < "2026-01-05T12:20:00Z"

    def previewed(**body):
        base = {"cron": "*/10 * * * *", "jitter_seconds": 599, "count": 5}
        response = h.api.post("/namespaces/default/calendar/preview", json=base | body)
        assert response.status_code == 200, response.get_json()
        return [item["at"] for item in response.get_json()["occurrences"]]

    assert previewed(schedule_id="jx") == upcoming
    assert previewed(schedule_id="jx", cron="0-59/10 * * * *") == upcoming
    # Another calendar starts after now, as the save would.
    changed = previewed(schedule_id="jx", cron="5-59/10 * * * *")
    assert changed[0] >= "2026-01-05T12:15:00Z"
    # Unnamed, or naming a schedule not saved yet: a new calendar, after now.
    assert previewed()[0] >= "2026-01-05T12:20:00Z"
    assert previewed(schedule_id="not-yet")[0] >= "2026-01-05T12:20:00Z"
    # `after` still says where it starts.
    assert previewed(schedule_id="jx", after="2026-01-05T12:19:59Z")[:4] == upcoming[1:5]


def test_preview_refuses_what_a_save_refuses_with_the_same_codes(h):
    """A shorthand's length is the calendar's to refuse, in the preview and the save alike; a
    null jitter is none, as in a save."""
    long = "0 0 * * " + "1," * 130 + "1"
    for path, body in (
        ("/namespaces/default/calendar/preview", {"cron": long}),
        ("/schedules", {"id": "long", "cron": long, "workflow": "wf"}),
    ):
        response = h.api.post(path, json=body)
        assert response.status_code == 422
        error = response.get_json()["error"]
        assert error["code"] == "CALENDAR_INVALID", error
        assert error["details"]["errors"][0]["loc"][0] == "cron"
        assert "longer than 256" in error["message"]
    response = h.api.post(
        "/namespaces/default/calendar/preview", json={"cron": "0 0 * * *", "jitter_seconds": None}
    )
    assert response.status_code == 200


def test_preview_of_a_named_schedule_as_it_resumes_with_its_own_jitter(h):
    """A paused schedule previews from its cursor or now, the later, as resuming it starts
    (after the clock moved back it listed what had fired already); left out, the jitter is the
    schedule's own; the id is an identifier, matched whole."""
    h.create("pz", cron="*/10 * * * *", jitter_seconds=300)
    h.tick("12:10:00")
    h.tick("12:25:00")  # cursor at 12:25
    h.set_clock("12:05:00")
    assert h.post("pz", "pause").status_code == 200
    path = "/namespaces/default/calendar/preview"
    body = {"cron": "*/10 * * * *", "schedule_id": "pz", "count": 3}
    paused = h.api.post(path, json=body).get_json()["occurrences"]
    assert paused[0]["at"] >= "2026-01-05T12:30:00Z"
    assert h.post("pz", "resume").status_code == 200
    upcoming = [item["at"] for item in h.read("pz")["upcoming"][:3]]
    assert [
        item["at"] for item in h.api.post(path, json=body).get_json()["occurrences"]
    ] == upcoming
    assert [item["at"] for item in paused] == upcoming
    for bad in ("pz\n", "a/b", "", " pz"):
        refused = h.api.post(path, json=body | {"schedule_id": bad})
        assert refused.status_code == 422, bad
        assert refused.get_json()["error"]["details"]["errors"][0]["loc"] == ["schedule_id"]
