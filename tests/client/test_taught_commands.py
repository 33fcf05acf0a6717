"""Every `almanac …` command the console teaches (empty states, hints) is a real command."""

from __future__ import annotations

import re

import click

from almanac.cli import cli
from tests.live import ROOT

TAUGHT = re.compile(r"<code>almanac ([^<]+)</code>")


def taught_commands() -> list[tuple[str, str]]:
    found = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        for command in TAUGHT.findall(template.read_text()):
            found.append((template.name, command))
    return found


def resolve(words: list[str]) -> click.Command:
    """The command `words` names, down through the groups; fails on an unknown word."""
    command: click.Command = cli
    with click.Context(cli) as ctx:
        for word in words:
            if not isinstance(command, click.Group):
                break
            sub = command.get_command(ctx, word)
            assert sub is not None, f"no command {word!r} in {' '.join(words)!r}"
            command = sub
    assert not isinstance(command, click.Group), f"{' '.join(words)!r} names a group"
    return command


def test_the_console_teaches_only_commands_that_exist():
    taught = taught_commands()
    assert len(taught) >= 3, taught
    for template, command in taught:
        assert resolve(command.split()).name, (template, command)
