"""The `almanac` command: the API from a terminal (see docs/cli.md)."""

from __future__ import annotations

import click

from almanac.cli.apply import apply
from almanac.cli.auth import auth
from almanac.cli.base import Root, refuse_repeated_options
from almanac.cli.runs import incidents, runs, tasks
from almanac.cli.schedules import schedules
from almanac.cli.workflows import activations, calendar, workflows
from almanac.version import VERSION


@click.group(cls=Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="almanac")
def cli() -> None:
    """Almanac from a terminal: schedules, runs, workflows over the HTTP API.

    Connection: --url/--token/--namespace/--profile on every command, else ALMANAC_URL,
    ALMANAC_TOKEN, ALMANAC_NAMESPACE, ALMANAC_PROFILE, else the profile written by
    `almanac auth setup`. Exit codes: 0 success, 1 API error, 2 usage or connection error
    (nothing sent), 3 sent but no answer (it may have been done), 4 the output could not be
    written, 141 the output's reader stopped reading (`| head`).
    """


schedules.add_command(apply)
for group in (auth, schedules, calendar, workflows, activations, runs, incidents, tasks):
    cli.add_command(group)
refuse_repeated_options(cli)


def main() -> None:
    cli(prog_name="almanac")
