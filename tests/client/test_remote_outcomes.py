"""What the client says when a request was not sent, was sent without an answer, or was
answered by something other than the API (stand-in servers; no database needed)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from almanac import AlmanacError, AsyncClient, Client, ConnectionFailed, NoAnswer
from almanac.cli import cli
from almanac.cli.output import table
from tests.client.conftest import JsonHandler, serving

TRIGGER = "/schedules/nightly/trigger"


class Silent(JsonHandler):
    """Reads the request, counts it, and answers only when the test is over (a slow server)."""

    posts = 0
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Silent.posts += 1
        Silent.release.wait(10)
        # The client gave up long ago: nobody reads this.
        with contextlib.suppress(OSError):
            self.send_json(200, {})


class Hangs(JsonHandler):
    """Reads the request, counts it, and closes the connection without a word."""

    seen: list[str] = []

    def handle_one_request(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if not self.parse_request():
            return
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hangs.seen.append(self.command)
        self.close_connection = True


@pytest.fixture
def silent() -> Iterator[str]:
    Silent.posts, Silent.release = 0, threading.Event()
    with serving(Silent) as url:
        yield url
        Silent.release.set()


def test_a_change_sent_without_an_answer_is_no_answer_not_cannot_reach(silent):
    """A trigger that timed out waiting was reported as "cannot reach": the server had made
    the run, and a pipeline reading "not reached" sent it again."""
    with Client(silent, "t", timeout=0.3) as client, pytest.raises(NoAnswer) as caught:
        client.request("POST", TRIGGER, json={})
    error = caught.value
    assert not isinstance(error, ConnectionFailed)
    assert error.code == "NO_ANSWER" and error.status is None
    assert error.message.startswith(f"sent POST {TRIGGER} to {silent} but got no answer (")
    assert "may have done it" in error.message
    assert Silent.posts == 1

    async def main() -> None:
        async with AsyncClient(silent, "t", timeout=0.3) as client:
            await client.request("POST", TRIGGER, json={})

    with pytest.raises(NoAnswer) as caught:
        asyncio.run(main())
    # httpx's async timeout has no text: the reason is its kind, not an empty "()".
    assert "no answer (ReadTimeout)" in caught.value.message
    assert Silent.posts == 2


def test_a_dropped_connection_after_sending_is_exit_3_and_never_sent_twice(tmp_path):
    Hangs.seen = []
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_TOKEN": "t", "ALMANAC_NAMESPACE": None}
    with serving(Hangs) as url:
        result = CliRunner().invoke(cli, ["schedules", "trigger", "nightly", "--url", url], env=env)
        assert result.exit_code == 3, result.output
        assert result.stderr.startswith("error NO_ANSWER: sent POST ")
        assert result.stdout == ""
        assert Hangs.seen == ["POST"]
        # A read is sent once more (a kept-alive connection the server closed), then said so.
        listed = CliRunner().invoke(cli, ["schedules", "list", "--url", url], env=env)
        assert listed.exit_code == 3 and Hangs.seen == ["POST", "GET", "GET"]


class Proxy503(JsonHandler):
    """A 503 from something in between (an HTML page), or the API's own BACKEND_BUSY."""

    seen: list[str] = []
    api = False

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Proxy503.seen.append(self.command)
        if Proxy503.api:
            self.send_json(503, {"error": {"code": "BACKEND_BUSY", "message": "busy"}})
            return
        page = b"<html><body>503 Service Unavailable</body></html>"
        self.send_response(503)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    do_GET = do_POST = _answer  # noqa: N815 - the http.server naming


@pytest.mark.parametrize("api", [False, True])
def test_a_change_is_retried_only_on_the_apis_own_busy_answer(monkeypatch, api):
    """A proxy's 503 may come after the server acted: a trigger sent again on its word could
    start a second run. The API's BACKEND_BUSY wrote nothing, so it is retried; reads always."""
    monkeypatch.setattr("almanac.transport.time.sleep", lambda _delay: None)
    Proxy503.seen, Proxy503.api = [], api
    with serving(Proxy503) as url, Client(url, "t", retries=2) as client:
        with pytest.raises(AlmanacError) as caught:
            client.request("POST", TRIGGER, json={})
        assert caught.value.status == 503
        assert Proxy503.seen == ["POST"] * (3 if api else 1)
        Proxy503.seen = []
        with pytest.raises(AlmanacError):
            client.request("GET", "/schedules")
        assert Proxy503.seen == ["GET"] * 3


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9?x=1", "http://127.0.0.1:9/#frag", "http://127.0.0.1:9/?", "http://h/#"],
)
def test_a_url_with_a_query_or_fragment_names_no_server(tmp_path, url):
    """The API's path went after the whole string, into the query or the fragment: the
    request reached the console's front page and answered "not JSON"."""
    with pytest.raises(ConnectionFailed) as caught:
        Client(url, "t")
    assert "not a valid URL (it has a query or a fragment" in caught.value.message
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ALMANAC_TOKEN": "t"}
    result = CliRunner().invoke(cli, ["schedules", "list", "--url", url], env=env)
    assert result.exit_code == 2 and "not a valid URL" in result.stderr


def test_a_sampled_table_prints_rows_before_the_list_ends(capsys):
    """`--all` in table output built every row before printing one: a failure on a late page
    printed nothing at all. The widths come from the sample; an id is never cut."""

    def rows() -> Iterator[dict[str, str]]:
        for index in range(5):
            yield {"id": f"s-{index}", "notes": "short"}
        yield {"id": "a-much-longer-schedule-id", "notes": "a note much longer than the sample"}
        raise RuntimeError("page 3 failed")

    columns = [("ID", lambda r: r["id"]), ("Notes", lambda r: r["notes"])]
    with pytest.raises(RuntimeError):
        table(rows(), columns, whole=1, sample=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "Notes"] and len(lines) == 7
    assert lines[1].split() == ["s-0", "short"]
    assert lines[6].startswith("a-much-longer-schedule-id ") and lines[6].endswith("…")


class Echo(JsonHandler):
    """Answers every GET with the query it received."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        self.send_json(200, {"path": self.path})


def test_request_params_repeat_a_key_from_a_list_or_from_pairs():
    """A list of pairs, the only way to repeat `label`, raised AttributeError."""
    with serving(Echo) as url, Client(url, "t") as client:
        for params in (
            {"label": ["team:a", "tier:1"], "limit": 5},
            [("label", "team:a"), ("label", "tier:1"), ("limit", 5)],
        ):
            answer = client.request("GET", "/schedules", params=params)
            assert answer["path"] == "/api/v1/schedules?label=team%3Aa&label=tier%3A1&limit=5"

        async def main() -> str:
            async with AsyncClient(url, "t") as aclient:
                answer = await aclient.request("GET", "/runs", params=[("label", "x:y")])
                return str(answer["path"])

        assert asyncio.run(main()) == "/api/v1/runs?label=x%3Ay"
