"""Printing lists: one page (with a hint for the next) or, with --all, every page streamed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from almanac.cli.base import Cli
from almanac.cli.output import Column, dumps, hint, stream_items, table

if TYPE_CHECKING:
    from almanac.client import Pager


# `--all` in table output sizes its columns on this many rows, then streams the rest.
PAGE_SAMPLE = 100

PAGE_OPTIONS = [
    click.option("--limit", type=click.IntRange(1, 100), help="Items per page."),
    click.option("--cursor", help="Start at this page (a next_cursor)."),
    click.option("--all", "every", is_flag=True, help="Walk every page."),
]


def page_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--limit`, `--cursor` and `--all`: how every cursor-paged list is walked."""
    for option in reversed(PAGE_OPTIONS):
        command = option(command)
    return command


def show_pages(
    cli: Cli, pager: Pager[Any], columns: Sequence[Column], every: bool, *, history: bool = False
) -> None:
    """Print `pager`'s first page, or every page with `every` (--all). The first column (the
    id other commands take) is printed whole, however narrow the terminal."""
    key = "events" if history else "items"
    if every:
        items = pager.raw()
        if cli.output == "table":
            # Widths from the first page's worth; the rest print as the pages come.
            table(items, columns, whole=1, sample=PAGE_SAMPLE)
        else:
            stream_items(cli.output, items)
        return
    body = pager.page()
    if cli.output == "json":
        click.echo(dumps(body, indent=2))
    elif cli.output == "jsonl":
        for item in body.get(key, []):
            click.echo(dumps(item))
    else:
        table(body.get(key, []), columns, whole=1)
    if cli.output == "table":
        _next_hint(body, history)


def _next_hint(body: dict[str, Any], history: bool) -> None:
    if history and body.get("has_more"):
        hint(f"More events available (--after-sequence {body.get('next_cursor')})")
    elif not history and body.get("next_cursor"):
        hint(f"More items available (--cursor {body['next_cursor']})")
