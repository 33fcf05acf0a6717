"""Bad input files, options, URLs, tokens and answers end in a clean error, never a traceback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from almanac import AlmanacError, AsyncClient, Client, ConnectionFailed
from tests.client.conftest import JsonHandler, run_cli, schedule_body, serving


class Recorder(JsonHandler):
    """Answers every request with `Recorder.answer` (status 200) and records its path."""

    answer: Any = {}
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        self.reply()

    def do_POST(self) -> None:  # noqa: N802
        self.reply()

    def reply(self) -> None:
        Recorder.seen.append(self.path)
        self.send_json(200, Recorder.answer)


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.answer, Recorder.seen = {}, []
    with serving(Recorder) as url:
        yield url


def test_files_that_are_not_utf8_are_usage_errors_naming_the_file(recorder, tmp_path):
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps(schedule_body("café"), ensure_ascii=False).encode("latin-1"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "latin.json").write_bytes(latin.read_bytes())
    for args in (
        ("schedules", "apply", str(latin)),
        ("schedules", "apply", str(folder)),
        ("schedules", "save", "--request", str(latin)),
        ("workflows", "deploy", str(latin)),
    ):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "latin.json is not UTF-8 text" in result.stderr
    piped = run_cli(
        recorder, tmp_path, "schedules", "save", "--request", "-", input=b'{"x": "\xe9"}'
    )
    assert piped.exit_code == 2 and "stdin is not UTF-8 text" in piped.stderr
    assert Recorder.seen == []


def test_nan_and_infinity_are_refused_before_anything_is_sent(recorder, tmp_path):
    nan = tmp_path / "nan.json"
    nan.write_text('{"schedule_id": "x", "cron": "0 * * * *", "jitter_seconds": NaN}')
    huge = tmp_path / "huge.json"
    huge.write_text('{"name": "w", "steps": [], "x": 1e999}')
    yaml_inf = tmp_path / "inf.yaml"
    yaml_inf.write_text("schedule_id: x\ncron: 0 * * * *\njitter_seconds: .inf\n")
    for args, name in (
        (("schedules", "save", "--request", str(nan)), "nan.json"),
        (("schedules", "apply", str(nan)), "nan.json"),
        (("schedules", "apply", str(yaml_inf)), "inf.yaml"),
        (("workflows", "deploy", str(huge)), "huge.json"),
        (("runs", "start", "w", "--input", '{"x": NaN}'), "--input"),
        (("runs", "signal", "r", "go", "--payload", "[Infinity]"), "--payload"),
    ):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert name in result.stderr and "NaN and Infinity are not allowed" in result.stderr
    assert Recorder.seen == []


def test_json_nested_too_deep_to_read_is_a_usage_error_not_a_traceback(recorder, tmp_path):
    deep = "[" * 10_000 + "]" * 10_000
    document = tmp_path / "deep.json"
    document.write_text(deep)
    for args, name in (
        (("schedules", "save", "--request", str(document)), "deep.json"),
        (("schedules", "apply", str(document)), "deep.json"),
        (("workflows", "deploy", str(document)), "deep.json"),
        (("runs", "start", "w", "--input", deep), "--input"),
        (("runs", "signal", "r", "go", "--payload", deep), "--payload"),
        (("tasks", "complete", "t", "--output-json", deep), "--output-json"),
    ):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert name in result.stderr and "nests too deeply" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert Recorder.seen == []


def test_a_url_that_cannot_be_parsed_is_a_connection_error(tmp_path):
    result = run_cli("http://[::1", tmp_path, "schedules", "list")
    assert result.exit_code == 2
    assert result.stderr.startswith("error CONNECTION: cannot reach http://[::1: not a valid URL")
    with pytest.raises(ConnectionFailed):
        Client("http://[::1", "t")
    with pytest.raises(ConnectionFailed):
        AsyncClient("http://[::1", "t")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("notaurl", "it must start with http:// or https://"),
        ("ftp://127.0.0.1:1", "it must start with http:// or https://"),
        ("http://127.0.0.1:99999", "port 99999 is not between 1 and 65535"),
        ("http://", "it names no host"),
    ],
)
def test_a_url_no_server_can_answer_at_is_refused_when_the_client_is_created(url, why, tmp_path):
    with pytest.raises(ConnectionFailed, match="not a valid URL"):
        Client(url, "t")
    with pytest.raises(ConnectionFailed, match="not a valid URL"):
        AsyncClient(url, "t")
    result = run_cli(url, tmp_path, "schedules", "list")
    assert result.exit_code == 2
    assert result.stderr == f"error CONNECTION: cannot reach {url}: not a valid URL ({why})\n"


def test_a_token_that_is_not_ascii_is_refused_clearly(recorder, tmp_path):
    result = run_cli(recorder, tmp_path, "schedules", "list", "--token", "été")
    assert result.exit_code == 2
    assert "the token must be printable ASCII text" in result.stderr
    with pytest.raises(ValueError, match="printable ASCII"):
        Client(recorder, "été")
    with pytest.raises(ValueError, match="printable ASCII"):
        AsyncClient(recorder, "tok\nen")
    assert Recorder.seen == []


@pytest.mark.parametrize("answer", [[1, 2], "text", {"items": 5}, {"items": [1]}])
def test_an_answer_of_the_wrong_shape_is_a_bad_response_error(recorder, tmp_path, answer):
    Recorder.answer = answer
    commands = [("schedules", "list"), ("runs", "list", "--all"), ("runs", "list", "-o", "json")]
    if not isinstance(answer, dict):
        commands += [("schedules", "read", "x"), ("runs", "show", "r")]
    for args in commands:
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 1, (args, result.stderr)
        assert result.stderr.startswith("error BAD_RESPONSE: the answer to GET "), result.stderr
    with Client(recorder, "t") as client, pytest.raises(AlmanacError) as caught:
        list(client.list_schedules())
    assert caught.value.code == "BAD_RESPONSE"


def test_text_that_is_not_valid_unicode_is_a_usage_error_before_any_request(recorder, tmp_path):
    # A lone surrogate: from a JSON escape, or from argument bytes the terminal could not decode.
    surrogate = tmp_path / "sur.json"
    surrogate.write_text('{"schedule_id": "s", "cron": "0 3 * * *", "notes": "\\ud800"}')
    for args in (
        ("runs", "start", "w", "--input", '{"a": "\\ud800"}'),
        ("schedules", "save", "--request", str(surrogate)),
        ("schedules", "apply", str(surrogate)),
    ):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "lone surrogate" in result.stderr and "Traceback" not in result.stderr
    for args in (("schedules", "read", "s\udce9"), ("schedules", "list", "--q", "\udce9")):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "not valid Unicode" in result.stderr
    assert Recorder.seen == []


def test_an_object_without_the_fields_the_api_always_sends_is_a_bad_response(recorder, tmp_path):
    Recorder.answer = {"foo": 1}
    with Client(recorder, "t") as client:
        for read in (
            client.me,
            lambda: client.get_schedule("x"),
            lambda: list(client.list_schedules()),
            lambda: client.get_run("r"),
            lambda: client.get_schedule_history("x"),
            lambda: list(client.iter_schedule_history("x")),
        ):
            with pytest.raises(AlmanacError) as caught:
                read()
            assert caught.value.code == "BAD_RESPONSE", read
    result = run_cli(recorder, tmp_path, "auth", "status")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error BAD_RESPONSE: the answer to GET /me "), result
    assert "Me needs 'username'" in result.stderr


def test_a_required_field_of_another_json_type_is_a_bad_response(recorder):
    Recorder.answer = {"username": "u", "superuser": "no", "namespaces": []}
    with Client(recorder, "t") as client, pytest.raises(AlmanacError, match="Me.superuser"):
        client.me()
    Recorder.answer = {"username": "u", "superuser": False, "namespaces": [{"name": "n"}]}
    with Client(recorder, "t") as client, pytest.raises(AlmanacError, match="NamespaceRole"):
        client.me()
    Recorder.answer = {"items": [{"name": True}], "next_cursor": None}
    with Client(recorder, "t") as client, pytest.raises(AlmanacError, match="BAD_RESPONSE"):
        list(client.list_namespaces())

    async def me() -> Any:
        async with AsyncClient(recorder, "t") as client:
            return await client.me()

    Recorder.answer = {"foo": 1}
    with pytest.raises(AlmanacError, match="BAD_RESPONSE"):
        asyncio.run(me())


def test_fields_the_api_may_leave_out_stay_optional(recorder):
    Recorder.answer = {"username": "u", "superuser": False, "namespaces": []}
    with Client(recorder, "t") as client:
        assert client.me().username == "u"
    Recorder.answer = {"items": [{"name": "n"}]}
    with Client(recorder, "t") as client:
        assert [ns.name for ns in client.list_namespaces()] == ["n"]
        assert [ns.created_at for ns in client.list_namespaces()] == [None]


def test_a_listed_item_without_the_apis_shape_is_a_bad_response_in_every_output(recorder, tmp_path):
    # The list commands stream the items as sent: they printed a row of dashes and exited 0.
    Recorder.answer = {"items": [{"foo": 1}], "next_cursor": None}
    for args in (
        ("schedules", "list"),
        ("runs", "list"),
        ("tasks", "list"),
        ("workflows", "list"),
        ("runs", "list", "-o", "jsonl"),
        ("schedules", "list", "--all", "-o", "json"),
    ):
        result = run_cli(recorder, tmp_path, *args)
        assert result.exit_code == 1, (args, result.output)
        assert "BAD_RESPONSE" in result.stderr and result.stdout == "", (args, result.output)

    async def walk() -> Any:
        async with AsyncClient(recorder, "t") as client:
            return [item async for item in client.list_schedules().raw()]

    with pytest.raises(AlmanacError, match="BAD_RESPONSE"):
        asyncio.run(walk())


def test_yaml_aliases_that_expand_past_any_request_are_refused_before_expanding(recorder, tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 8):  # ten times more at each level: 10^8 values from 400 bytes
        below = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{below}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "schedule_id: x\ncron: '0 * * * *'\nworkflow: w\nmemo:\n  " + "\n  ".join(lines)
    )
    looped = tmp_path / "loop.yaml"
    looped.write_text("schedule_id: x\nmemo: &m\n  again: *m\n")
    for document in (bomb, looped):
        for args in (
            ("schedules", "apply", str(document)),
            ("schedules", "save", "--request", str(document)),
        ):
            result = run_cli(recorder, tmp_path, *args)
            assert result.exit_code == 2, (args, result.stderr)
            assert "more than 600,000 values" in result.stderr and "Traceback" not in result.stderr
    assert Recorder.seen == []


def test_a_body_the_sdk_cannot_encode_for_depth_is_a_value_error_before_any_request(recorder):
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with Client(recorder, token="alm_x") as client, pytest.raises(ValueError, match="too deeply"):
        client.start_run("w", input={"x": deep})

    async def start() -> None:
        async with AsyncClient(recorder, token="alm_x") as aclient:
            await aclient.start_run("w", input={"x": deep})

    with pytest.raises(ValueError, match="too deeply"):
        asyncio.run(start())
    assert Recorder.seen == []
