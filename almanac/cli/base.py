"""What every command shares: connection and output options, the client, and exit codes.

Exit codes: 0 success; 1 an error answered by the API (`error CODE: message` on stderr);
2 a usage error or no connection to the server; 3 sent but no answer; 4 the output could not
be written (a full disk); 141 the output's reader went away (`| head`), as for a command that
SIGPIPE stops.
"""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from almanac.cli.config import resolve
from almanac.cli.output import inert
from almanac.errors import (
    AlmanacError,
    ConnectionFailed,
    InvalidId,
    NoAnswer,
    RevisionConflict,
)

if TYPE_CHECKING:
    from almanac.client import Client

OUTPUTS = ("table", "json", "jsonl")
USAGE, API_ERROR, NO_ANSWER = 2, 1, 3
# What a shell reports for a command that SIGPIPE stopped (128 + 13), as `cat` would be.
READER_GONE = 141
# The output could not be written (a full disk): the request may have been done.
OUTPUT_FAILED = 4
WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT})


@dataclass
class Cli:
    """The context a command runs with."""

    client: Client
    output: str


OPTIONS = [
    click.option("--url", envvar="ALMANAC_URL", help="Server URL [env ALMANAC_URL]."),
    click.option("--token", envvar="ALMANAC_TOKEN", help="API token [env ALMANAC_TOKEN]."),
    click.option(
        "--namespace", "-n", envvar="ALMANAC_NAMESPACE", help="Namespace [env ALMANAC_NAMESPACE]."
    ),
    click.option(
        "--profile",
        envvar="ALMANAC_PROFILE",
        help="Profile in profiles.toml [env ALMANAC_PROFILE].",
    ),
    click.option("--output", "-o", type=click.Choice(OUTPUTS), default="table", show_default=True),
]


def connected(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the connection and output options; the command receives a `Cli` first."""

    @functools.wraps(command)
    def run(
        url: str | None,
        token: str | None,
        namespace: str | None,
        profile: str | None,
        output: str,
        **kwargs: Any,
    ) -> Any:
        conn = resolve(url, token, namespace, profile)
        # Imported here, not at the top: the client brings in httpx, which is most of the
        # command's start-up time, and `--help` or a usage error never needs it.
        from almanac.client import Client

        try:
            client = Client(conn.url, conn.token, conn.namespace, source="cli")
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
        with client:
            return command(Cli(client, output), **kwargs)

    for option in reversed(OPTIONS):
        run = option(run)
    return run


class Root(click.Group):
    """The `almanac` group: turns client errors into the documented messages and exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
            # Output still buffered fails here, not at exit where the error has no handler.
            sys.stdout.flush()
            return result
        except BrokenPipeError:
            # The reader stopped reading (`almanac runs list --all | head`): stop quietly, with
            # SIGPIPE's status, not click's 1 (an API error here). Later writes, and the flush
            # at exit, go nowhere instead of raising again.
            silence(sys.stdout)
            ctx.exit(READER_GONE)
        except OSError as exc:
            if exc.errno not in WRITE_FAILURES:
                raise
            # On stdout or on stderr (a hint such as `More items available`): either way the
            # output is not all there, so 4, never 1 (the API's errors). What stdout already
            # holds is kept; one line, not a traceback; the rest of the output goes nowhere.
            flush_quietly(sys.stdout)
            silence(sys.stdout)
            complain(f"error OUTPUT: cannot write the output: {exc.strerror}")
            ctx.exit(OUTPUT_FAILED)
        except ConnectionFailed as exc:
            complain(f"error {exc.code}: {exc.message}")
            ctx.exit(USAGE)
        except NoAnswer as exc:
            # Neither "not done" (2, safe to send again) nor an answer (1): it may be done.
            complain(f"error {exc.code}: {exc.message}")
            ctx.exit(NO_ANSWER)
        except AlmanacError as exc:
            complain(describe(exc))
            ctx.exit(API_ERROR)
        except InvalidId as exc:
            # An id no request can name: with '/', empty, or not Unicode text (a lone surrogate
            # from a JSON escape or from argument bytes the terminal could not decode).
            raise click.UsageError(str(exc)) from exc
        except UnicodeEncodeError as exc:
            # Text elsewhere (a query parameter) that is not Unicode: no request can carry it.
            reason = exc.reason
            raise click.UsageError(
                f"an argument holds text that is not valid Unicode ({reason}); it cannot be sent"
            ) from exc


def flush_quietly(stream: Any) -> None:
    try:
        stream.flush()
    except (OSError, ValueError):
        pass


def silence(stream: Any) -> None:
    """Send what is still written to `stream`, and its flush at exit, to /dev/null."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError):  # no file descriptor (captured output)
        pass


def complain(text: str) -> None:
    """An error line on stderr. Best effort: when stderr cannot be written either, the exit
    code alone tells, and it stays the one the error calls for (not Python's 1 or 120)."""
    try:
        click.echo(text, err=True)
    except OSError:
        silence(sys.stderr)


def describe(exc: AlmanacError) -> str:
    text = f"error {exc.code}: {inert(exc.message)}"
    # A schedule that does not exist has no current revision: then the suffix is left out.
    if isinstance(exc, RevisionConflict) and exc.current_revision is not None:
        text += f" (current revision: {exc.current_revision})"
    for item in exc.details.get("errors", []) if isinstance(exc.details, dict) else []:
        if isinstance(item, dict):
            loc = ".".join(str(part) for part in item.get("loc", []))
            text += f"\n  {inert(loc)}: {inert(str(item.get('msg')))}"
    return text


# Python's JSON and YAML readers, and the check below, give up on nesting several hundred levels
# deep; the API refuses anything deeper than 64 anyway.
TOO_DEEP = "the JSON nests too deeply to be read (the API takes at most 64 levels)"


def read_text(path: str) -> str:
    """The UTF-8 text of a file, or of stdin for `-`; unreadable or not UTF-8 is a usage error."""
    name = "stdin" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {name}: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"{name} is not UTF-8 text: {exc}") from exc


def read_document(path: str) -> Any:
    """A JSON document from a file or stdin (`-`); a YAML file when its name says .yaml/.yml."""
    return parse_document(read_text(path), path)


def parse_document(text: str, name: str) -> Any:
    try:
        if name.endswith((".yaml", ".yml")):
            return json_value(within_reach(load_yaml(text)))
        return json_value(json.loads(text, object_pairs_hook=unique_keys))
    except ValueError as exc:
        raise click.BadParameter(f"{name}: {exc}") from exc
    except RecursionError:
        raise click.BadParameter(f"{name}: {TOO_DEEP}") from None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each given once, as the server requires: read here, a key given
    twice kept its last value before the request was even sent."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} is given twice in one object")
            seen.add(key)
    return value


# More values than any request the API takes (1 MiB of JSON) can hold.
MAX_VALUES = 600_000


def within_reach(document: Any) -> Any:
    """`document`, unless it holds more than `MAX_VALUES` values once expanded: a YAML alias
    repeats what it names, so a few hundred bytes of nested aliases would expand to billions
    (and an alias inside what it names, forever). Counted without recursion, up to the limit."""
    pending, seen = [document], 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValueError(
                f"it expands to more than {MAX_VALUES:,} values (YAML aliases repeat what they "
                "name): more than a request can carry"
            )
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return document


def load_yaml(text: str) -> Any:
    try:
        import yaml  # optional: only YAML files need PyYAML, which the CLI does not require
    except ImportError as exc:
        raise click.UsageError("YAML files need PyYAML: pip install 'almanac[yaml]'") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


def json_value(value: Any) -> Any:
    """`value` as the API can receive it, checked here so no file fails halfway through a run.

    YAML reads unquoted dates and times as objects: they become ISO-8601 text (a time in UTC
    ends in `Z`, one without a zone keeps none, so the server names the field). NaN and
    infinities (which Python's JSON reader accepts), binary data and sets are refused.
    """
    if isinstance(value, dict):
        return {_key(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number (NaN and Infinity are not allowed)")
    if isinstance(value, date):
        return _iso(value)
    if isinstance(value, str):
        _check_unicode(value)
        return value
    if value is None or isinstance(value, int | float):
        return value
    raise ValueError(f"a {type(value).__name__} value cannot be sent as JSON")


def _key(key: Any) -> Any:
    if isinstance(key, str):
        _check_unicode(key)
    return _iso(key) if isinstance(key, date) else key


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "a string holds a lone surrogate (like the escape \\ud800), not valid Unicode text"
        ) from None


def _iso(value: date) -> str:
    if isinstance(value, datetime) and value.utcoffset() == timedelta(0):
        return value.replace(tzinfo=None).isoformat() + "Z"
    return value.isoformat()


def json_option(value: str | None, name: str) -> Any:
    """Parse a `--input`/`--payload`/`--output-json` JSON argument, or a usage error."""
    if value is None:
        return None
    try:
        return json_value(json.loads(value, object_pairs_hook=unique_keys))
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=name) from exc
    except RecursionError:
        raise click.BadParameter(TOO_DEEP, param_hint=name) from None


def refuse_repeated_options(group: click.Group) -> None:
    """Make an option that takes one value, given twice, a usage error on every command under
    `group`. Click keeps the last one silently: `runs list --status completed --status pending`
    listed pending runs only, as the API did before it refused a repeated filter."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            refuse_repeated_options(command)
        else:
            parse = command.parse_args
            command.parse_args = functools.partial(_parse_once, command, parse)  # type: ignore[method-assign]


def _parse_once(
    command: click.Command,
    parse: Callable[[click.Context, list[str]], list[str]],
    ctx: click.Context,
    args: list[str],
) -> list[str]:
    names: dict[str, click.Option] = {}
    for param in command.params:
        if isinstance(param, click.Option) and not (param.multiple or param.count or param.is_flag):
            names |= dict.fromkeys(param.opts, param)
    given: dict[str, int] = {}
    for arg in args:
        if arg == "--":
            break
        option = names.get(arg.split("=", 1)[0])
        if option is not None:
            given[option.opts[0]] = given.get(option.opts[0], 0) + 1
    for name, count in given.items():
        if count > 1:
            hint = (
                " (several go in one, comma-separated)"
                if "omma-separated" in (names[name].help or "")
                else ""
            )
            raise click.UsageError(f"{name} is given {count} times; give it once{hint}", ctx)
    return parse(ctx, args)
