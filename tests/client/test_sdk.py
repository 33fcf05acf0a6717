"""The Python SDK against a live server on both databases: Client, AsyncClient, ScheduleHandle."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from almanac import (
    AlmanacError,
    AsyncClient,
    CalendarInvalid,
    Client,
    NoAnswer,
    NotFound,
    NotUnicode,
    RevisionConflict,
    Schedule,
    ScheduleHistoryEvent,
    Unauthenticated,
    ValidationError,
)
from tests.client.conftest import JsonHandler, schedule_body, serving

TRIGGERS = ("2026-10-01T00:00:00Z", "2026-10-01T02:30:00Z")  # 150 minutely occurrences


def busy_schedule(sdk, schedule_id="busy"):
    sdk.save_schedule(schedule_body(schedule_id, "* * * * *", overlap_policy="allow_all"))
    assert sdk.backfill_schedule(schedule_id, *TRIGGERS).started == 150


def test_get_schedule_history_is_one_page_with_the_reference_names(sdk):
    busy_schedule(sdk)
    page = sdk.get_schedule_history("busy", limit=100)
    assert [e.sequence for e in page.events] == list(range(1, 101))
    assert (page.next_cursor, page.has_more) == (100, True)
    assert isinstance(page.events[0], ScheduleHistoryEvent)
    assert page.events[1].recorded_at.tzinfo is not None
    last = sdk.get_schedule_history("busy", after_sequence=page.next_cursor)
    assert [e.sequence for e in last.events] == list(range(101, 152)) and not last.has_more


def test_iter_schedule_history_walks_every_page(sdk):
    busy_schedule(sdk)
    events = list(sdk.iter_schedule_history("busy", limit=7))
    assert [e.sequence for e in events] == list(range(1, 152))
    tail = [e.sequence for e in sdk.iter_schedule_history("busy", limit=50, after_sequence=140)]
    assert tail == list(range(141, 152))


def test_async_iter_schedule_history_walks_every_page(live, namespace, sdk):
    busy_schedule(sdk)

    async def walk() -> list[int]:
        async with AsyncClient(live.url, live.token, namespace) as client:
            page = await client.get_schedule_history("busy", limit=10)
            assert page.has_more and page.next_cursor == 10
            return [
                event.sequence async for event in client.iter_schedule_history("busy", limit=20)
            ]

    assert asyncio.run(walk()) == list(range(1, 152))


def test_revision_conflict_carries_the_current_revision(sdk):
    sdk.save_schedule(schedule_body("guarded"))
    sdk.pause_schedule("guarded", 1)
    with pytest.raises(RevisionConflict) as caught:
        sdk.resume_schedule("guarded", 1)
    error = caught.value
    assert (error.current_revision, error.status, error.code) == (2, 409, "SCHEDULE_REVISION")
    with pytest.raises(RevisionConflict) as again:
        sdk.save_schedule(schedule_body("guarded"))
    assert again.value.current_revision == 2


def test_typed_errors_by_code(sdk, live, namespace):
    with pytest.raises(NotFound):
        sdk.get_schedule("nope")
    with pytest.raises(CalendarInvalid) as calendar:
        sdk.save_schedule(schedule_body("bad", "61 * * * *"))
    assert calendar.value.details["errors"][0]["loc"][0] == "cron"
    with pytest.raises(ValidationError):
        sdk.save_schedule(schedule_body("bad", overlap_policy="sometimes"))
    sdk.create_namespace(f"{namespace}-b")
    with pytest.raises(Unauthenticated):
        type(sdk)(live.url, "wrong-token", namespace).get_schedule("x")
    viewer = sdk.request("GET", "/me")
    assert viewer["username"] == "admin"
    # A namespace the caller cannot see is NOT_FOUND, exactly like one that does not exist.
    with pytest.raises(NotFound):
        type(sdk)(live.url, live.token, "no-such-namespace").get_schedule("x")


def test_a_handle_carries_its_revision_through_changes(sdk):
    sdk.save_schedule(schedule_body("handled", overlap_policy="allow_all"))
    handle = sdk.schedule("handled")
    described = handle.describe()
    assert isinstance(described, Schedule) and handle.revision == 1
    assert handle.pause("maintenance").status == "paused" and handle.revision == 2
    assert handle.resume().status == "active" and handle.revision == 3
    assert handle.update({"notes": "patched"}).notes == "patched" and handle.revision == 4
    assert handle.trigger().outcome == "triggered"
    result = handle.backfill(datetime(2026, 10, 1, tzinfo=UTC), "2026-10-01T00:00:00.000001Z")
    assert [(r.outcome, r.occurrence_time) for r in result.results] == [
        ("backfilled", datetime(2026, 10, 1, tzinfo=UTC))
    ]
    page = handle.history(limit=2)
    assert [e.event_type for e in page.events] == ["ScheduleCreated", "SchedulePaused"]
    assert [e.sequence for e in handle.iter_history(after_sequence=3)][0] == 4
    stale = sdk.schedule("handled", revision=1)
    with pytest.raises(RevisionConflict):
        stale.pause()
    assert handle.delete().status == "deleted"


def test_the_async_client_has_the_same_methods(live, namespace):
    async def scenario() -> list[str]:
        async with AsyncClient(live.url, live.token, namespace) as client:
            created = await client.save_schedule(
                schedule_body("async", "* * * * *", overlap_policy="allow_all")
            )
            handle = client.schedule("async")
            await handle.pause()
            await handle.resume()
            trigger = await handle.trigger()
            result = await client.backfill_schedule("async", *TRIGGERS)
            ids = [s.schedule_id async for s in client.list_schedules(limit=1)]
            runs = [r.run_id async for r in client.list_runs(schedule_id="async")]
            assert created.revision == 1 and handle.revision == 3
            assert trigger.outcome == "triggered" and result.started == 150
            assert len(runs) == 151
            return ids

    assert asyncio.run(scenario()) == ["async"]


def test_list_schedules_filters_and_pages(sdk):
    for index in range(7):
        labels = {"team": "billing" if index % 2 else "ops"}
        sdk.save_schedule(schedule_body(f"f-{index}", labels=labels))
    billing = [s.schedule_id for s in sdk.list_schedules(labels={"team": "billing"}, limit=2)]
    assert sorted(billing) == ["f-1", "f-3", "f-5"]
    first = sdk.list_schedules(limit=3).page()
    assert len(first["items"]) == 3 and first["next_cursor"]
    sdk.schedule("f-0").delete()
    assert len(list(sdk.list_schedules())) == 6
    assert len(list(sdk.list_schedules(include_deleted=True))) == 7


def test_the_async_client_has_raw_lists_and_close_as_documented(live, namespace, sdk):
    for index in range(3):
        sdk.save_schedule(schedule_body(f"raw-{index}"))

    async def scenario() -> list[dict]:
        client = AsyncClient(live.url, live.token, namespace)
        items = [item async for item in client.list_schedules(limit=2).raw()]
        await client.close()
        return items

    items = asyncio.run(scenario())
    assert sorted(item["schedule_id"] for item in items) == ["raw-0", "raw-1", "raw-2"]
    assert all(isinstance(item, dict) and "revision" in item for item in items)


class ClosesFirstConnection(JsonHandler):
    """Reads each request, but closes the first connection without answering (as a server does
    with a kept-alive connection it closed while the client reused it)."""

    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append(self.command)
        if len(type(self).seen) == 1:
            self.close_connection = True
            return
        self.send_json(200, {"username": "u", "namespaces": [], "superuser": False})

    do_GET = do_POST = _answer


def test_a_read_is_sent_again_once_when_the_server_dropped_the_connection():
    ClosesFirstConnection.seen = []
    with serving(ClosesFirstConnection) as url, Client(url, "t", "default", retries=0) as client:
        assert client.me().username == "u"
        assert ClosesFirstConnection.seen == ["GET", "GET"]
    # A change is never sent twice: the server may have made it, and the error says so.
    ClosesFirstConnection.seen = []
    with serving(ClosesFirstConnection) as url, Client(url, "t", "default", retries=0) as client:
        with pytest.raises(NoAnswer):
            client.create_namespace("x")
        assert ClosesFirstConnection.seen == ["POST"]


def test_the_async_client_sends_a_read_again_once_too():
    ClosesFirstConnection.seen = []

    async def read(url: str) -> str:
        async with AsyncClient(url, "t", "default", retries=0) as client:
            return (await client.me()).username

    with serving(ClosesFirstConnection) as url:
        assert asyncio.run(read(url)) == "u"
    assert ClosesFirstConnection.seen == ["GET", "GET"]


def test_an_error_page_that_is_not_the_apis_is_a_bad_response_never_echoed(live, almanac):
    # The server's static files answer a missing file with an HTML page, as a proxy would.
    result = almanac("schedules", "list", "--url", f"{live.url}/static")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error BAD_RESPONSE: the server answered 404 (text/html")
    assert "<" not in result.stderr
    with Client(f"{live.url}/static", live.token) as client, pytest.raises(AlmanacError) as caught:
        client.get_schedule("x")
    assert (caught.value.code, caught.value.status) == ("BAD_RESPONSE", 404)
    assert not isinstance(caught.value, NotFound)


class NotTheApi(JsonHandler):
    """Answers every GET with an error whose body is not the API's error shape."""

    answers: list[tuple[int, Any]] = [
        (502, "\x1b]0;pwned\x07 Bad gateway"),
        (500, {"detail": "boom"}),
        (404, {"error": "not found"}),
        (400, {"error": {"message": "no code"}}),
    ]

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        status, body = NotTheApi.answers[int(self.path.rsplit("/", 1)[-1])]
        self.send_json(status, body)


def test_an_error_body_without_the_apis_error_shape_names_status_and_content_type():
    with serving(NotTheApi) as url, Client(url, "t", retries=0) as client:
        for index, (status, _) in enumerate(NotTheApi.answers):
            with pytest.raises(AlmanacError) as caught:
                client.get_run(str(index))
            assert caught.value.code == "BAD_RESPONSE", caught.value
            assert caught.value.status == status
            assert caught.value.message == (
                f"the server answered {status} (application/json) without the API's error body"
            )


def test_text_that_is_not_unicode_is_refused_by_the_server_naming_its_field(sdk, live, namespace):
    # A lone surrogate cannot be encoded as UTF-8: it travels escaped, and the server's 422
    # names where it is (it was a bare UnicodeEncodeError from inside the HTTP library).
    body = schedule_body("odd", notes="ok \ud800")
    with pytest.raises(ValidationError) as caught:
        sdk.save_schedule(body)
    assert caught.value.details["errors"][0]["loc"] == ["body", "notes"]
    assert "lone surrogate" in caught.value.details["errors"][0]["msg"]

    async def start() -> None:
        async with AsyncClient(live.url, live.token, namespace) as client:
            await client.start_run("noop-flow", input={"k": "\udfff"})

    with pytest.raises(ValidationError) as caught:
        asyncio.run(start())
    assert caught.value.details["errors"][0]["loc"] == ["body", "input", "k"]
    assert [s.id for s in sdk.list_schedules()] == []
    assert list(sdk.list_runs()) == []
    # In a path (an id), where the server cannot be asked: a ValueError naming it, no request.
    for call in (lambda: sdk.get_run("r\ud800"), lambda: sdk.get_schedule("s\udfff")):
        with pytest.raises(NotUnicode, match="lone surrogate"):
            call()
    # Text beyond the basic plane still travels as UTF-8 and comes back whole.
    saved = sdk.save_schedule(schedule_body("emoji", notes="\U0001f600 é"))
    assert saved.notes == "\U0001f600 é"
