"""Sizes: at most 32 expressions and 32 intervals per spec, 1 MiB bodies, 64 levels of JSON,
instants within 1970…9000, durations up to 100 years, ASCII query integers (finding 1 and 6)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.context import database
from app.db import Schedule, ScheduleHistoryEvent
from tests.security.conftest import csrf_from, deploy, error_of, sign_in


def _crons(count: int) -> list[str]:
    return [f"{minute % 60} {minute // 60} * * *" for minute in range(count)]


def _intervals(count: int) -> list[dict[str, str]]:
    return [{"every": f"PT{index + 2}M"} for index in range(count)]


def _schedule_rows(app) -> int:
    with database(app).session() as session:
        return int(session.scalar(select(func.count()).select_from(Schedule)) or 0)


def test_preview_refuses_33_expressions_and_33_intervals_naming_the_field(api_for):
    viewer = api_for("vic", "viewer")
    ok = viewer.post("/calendar/preview", json={"spec": {"cron_expressions": _crons(32)}})
    assert ok.status_code == 200
    cases = [
        ({"cron_expressions": _crons(33)}, "cron_expressions"),
        ({"cron_expressions": _crons(40_320)}, "cron_expressions"),
        ({"intervals": _intervals(33)}, "intervals"),
    ]
    for spec, field in cases:
        response = viewer.post("/calendar/preview", json={"spec": spec})
        assert response.status_code == 422
        error = error_of(response)
        assert error["code"] == "VALIDATION"
        assert error["details"]["errors"][0]["loc"] == ["spec", field]


def test_save_refuses_too_many_expressions_and_writes_nothing(app, admin_api):
    deploy(admin_api)
    before = _schedule_rows(app)
    for spec, field in (
        ({"cron_expressions": _crons(33)}, "cron_expressions"),
        ({"intervals": _intervals(33)}, "intervals"),
    ):
        body = {"id": "big", "spec": spec, "action": {"workflow": "wf"}}
        response = admin_api.post("/schedules", json=body)
        assert response.status_code == 422, response.get_json()
        error = error_of(response)
        assert error["code"] == "VALIDATION"
        assert error["details"]["errors"][0]["loc"] == ["spec", field]
    assert _schedule_rows(app) == before
    body = {"id": "ok", "spec": {"cron_expressions": _crons(32)}, "action": {"workflow": "wf"}}
    assert admin_api.post("/schedules", json=body).status_code == 201


def test_console_form_refuses_33_expressions(app, client, accounts, admin_api):
    deploy(admin_api)
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    token = csrf_from(client.get("/ns/default/schedules/new"))
    before = _schedule_rows(app)
    response = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "big",
            "cron_expressions": "\n".join(_crons(33)),
            "timezone": "UTC",
            "workflow": "wf",
            "input": "{}",
        },
    )
    assert response.status_code == 422
    assert "at most 32" in response.get_data(as_text=True)
    assert _schedule_rows(app) == before


def test_body_over_one_mebibyte_is_413_with_the_error_body(admin_api):
    response = admin_api.post(
        "/calendar/preview",
        data=b'{"spec": {"cron": "* * * * *"}, "pad": "' + b"x" * (1024 * 1024) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert error_of(response)["code"] == "PAYLOAD_TOO_LARGE"


def test_json_nested_deeper_than_64_is_422(app, admin_api):
    deploy(admin_api)
    for depth in (65, 1000, 100_000):
        nested = "[" * depth + "]" * depth
        body = '{"workflow": "wf", "input": {"x": ' + nested + "}}"
        response = admin_api.post("/runs", data=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 422, (depth, response.data[:200])
        assert error_of(response)["code"] == "VALIDATION"
    fine = "[" * 60 + "]" * 60
    body = '{"workflow": "wf", "input": {"x": ' + fine + "}}"
    response = admin_api.post("/runs", data=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 201


def test_instants_outside_1970_to_9000_are_422_never_500(app, admin_api):
    deploy(admin_api)
    for instant in ("9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z"):
        preview = admin_api.post(
            "/calendar/preview", json={"spec": {"cron": "* * * * *"}, "after": instant}
        )
        assert preview.status_code == 422, (instant, preview.get_json())
        assert error_of(preview)["code"] == "VALIDATION"
        spec = {"cron": "* * * * *", "end_at": instant}
        save = admin_api.post(
            "/schedules", json={"id": "s", "spec": spec, "action": {"workflow": "wf"}}
        )
        assert save.status_code == 422, (instant, save.get_json())
        assert error_of(save)["code"] == "VALIDATION"
        assert save.get_json()["error"]["details"]["errors"][0]["loc"] == ["spec", "end_at"]
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(ScheduleHistoryEvent)) == 0


def test_durations_over_100_years_are_422_never_500(admin_api):
    deploy(admin_api)
    for every in ("P142857142W", "P999999999D", "P5300W"):
        spec = {"intervals": [{"every": every}]}
        response = admin_api.post("/calendar/preview", json={"spec": spec})
        assert response.status_code == 422, (every, response.get_json())
        assert error_of(response)["code"] == "VALIDATION"
    ok = admin_api.post("/calendar/preview", json={"spec": {"intervals": [{"every": "P5200W"}]}})
    assert ok.status_code == 200


def test_query_integers_are_ascii_digits_only(admin_api):
    deploy(admin_api)
    admin_api.post(
        "/schedules", json={"id": "s", "cron": "* * * * *", "action": {"workflow": "wf"}}
    )
    paths = (
        "/schedules?limit={}",
        "/runs?limit={}",
        "/workflows?limit={}",
        "/schedules/s?upcoming={}",
        "/schedules/s/history?limit={}",
        "/schedules/s/occurrences?limit={}",
        "/workflows/wf?version={}",
        "/tasks?limit={}",
        "/activations?limit={}",
    )
    for path in paths:
        for odd in ("²", "١٢", "1e3", "-1", "99999999999999999999999"):
            response = admin_api.get(path.format(odd))
            assert response.status_code in (400, 422), (path, odd, response.status_code)
            error_of(response)
    history = admin_api.get("/schedules/s/history?after_sequence=²")
    assert history.status_code == 400


def test_console_numbers_are_ascii_digits_only_and_never_500(app, client, accounts, admin_api):
    deploy(admin_api)
    admin_api.post(
        "/workflows",
        json={"name": "wf", "steps": [{"id": "b", "type": "action", "action": "noop"}]},
    )
    saved = admin_api.post("/schedules", json={"id": "s", "cron": "* * * * *", "workflow": "wf"})
    assert saved.status_code == 201
    run = admin_api.post("/runs", json={"workflow": "wf", "run_id": "r"})
    assert run.status_code == 201
    account = accounts.create("dora", role="deployer")
    sign_in(client, "dora", account.password)
    odd = ("²", "1²", "١", "1_0", "99999999999999999999", "4294967297")
    for value in odd:
        history = client.get(f"/ns/default/runs/r/history?after_sequence={value}")
        expected = 200 if value == "4294967297" else 400  # past the last sequence: empty
        assert history.status_code == expected, (value, history.status_code)
        simulated = client.get(f"/ns/default/schedules/s/simulate?minutes={value}")
        assert simulated.status_code == 422, (value, simulated.status_code)
        polled = client.get(f"/ns/default/?since={value}", headers={"HX-Request": "true"})
        assert polled.status_code == (200 if value == "4294967297" else 422), value
    # The poll's own `since` (a Unix time) is read, and one that is no time is named.
    poll = {"HX-Request": "true"}
    assert client.get("/ns/default/?since=1767614400", headers=poll).status_code == 200
    named = client.get("/ns/default/?since=abc", headers=poll).get_data(as_text=True)
    assert "since" in named and "must be the Unix time" in named
    token = csrf_from(client.get("/ns/default/workflows"))
    before = admin_api.get("/activations?workflow=wf").get_json()["items"]
    for value in (*odd, "0", "abc"):
        activated = client.post(
            "/ns/default/workflows/wf/activate", data={"csrf_token": token, "version": value}
        )
        assert activated.status_code == 302, (value, activated.status_code)
        assert "must be a version number" in client.get("/ns/default/workflows").get_data(
            as_text=True
        ), value
    assert admin_api.get("/activations?workflow=wf").get_json()["items"] == before
    # The largest sequence a database holds, and past it: an empty page, on both databases.
    for value in ("2147483647", "2147483648", "999999999999999999"):
        page = admin_api.get(f"/schedules/s/history?after_sequence={value}")
        assert page.status_code == 200, (value, page.get_json())
        assert page.get_json()["events"] == [] and page.get_json()["has_more"] is False
        console = client.get(f"/ns/default/schedules/s/history?after_sequence={value}")
        assert console.status_code == 200, value
        run_page = client.get(f"/ns/default/runs/r/history?after_sequence={value}")
        assert run_page.status_code == 200, value
