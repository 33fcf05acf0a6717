"""Printing results: aligned tables that fit the terminal, the API's JSON, or JSON lines."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sys
import unicodedata
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import click

Column = tuple[str, Callable[[dict[str, Any]], Any]]
MIN_WIDTH = 4
# A cut column keeps at least this many terminal columns: every status (`terminated`, the
# longest) reads whole, and `ready` and `retired` no longer both read `re…`.
CUT_FLOOR = 10
GAP = "  "


def width() -> int:
    """The terminal's width (COLUMNS when set), 80 when it cannot be known."""
    return shutil.get_terminal_size((80, 24)).columns


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        # Text as it reads (名前, not \u540d\u524d); JSON escapes C0, inert() C1, DEL, bidi.
        return inert(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    return inert(" ".join(str(value).split()))


# Characters a terminal acts on instead of showing: C0 and C1 controls (escape sequences that
# clear the screen or set the window title, backspace, bell), DEL, the bidirectional overrides
# and isolates (they reorder what follows), and lone surrogates (not text: they fail to print).
_ACTIVE = frozenset(
    [*range(0x00, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)


def inert(text: str) -> str:
    """`text` with every character a terminal would act on shown as its escape (`\\x1b`)."""
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    if code in _ACTIVE or 0xD800 <= code <= 0xDFFF:
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def fit(widths: list[int], total: int, whole: Collection[int] = ()) -> list[int]:
    """Shrink the widest columns until the row fits `total` columns; the columns at the
    indexes `whole` (a list's ids, which other commands take; instants) are never cut, and no
    column is cut below `CUT_FLOOR` (or its own width, when narrower): a row too wide then
    wraps, unless `layout` leaves columns out."""
    widths = list(widths)
    floors = [min(size, CUT_FLOOR) for size in widths]
    budget = total - len(GAP) * (len(widths) - 1)
    while sum(widths) > budget:
        cuttable = [i for i in range(len(widths)) if i not in whole and widths[i] > floors[i]]
        widest = max(cuttable, key=lambda i: widths[i], default=None)
        if widest is None:
            break
        widths[widest] -= 1
    return widths


def layout(
    natural: list[int], total: int, kept: Collection[int], fixed: int
) -> tuple[list[int], list[int]]:
    """The columns a table shows and their widths. When the row cannot fit `total` columns
    even with every cuttable column at its floor, columns are left out from the right, one at a
    time, until it does. The first `fixed` (at least the first: the id) always stay; when they
    alone are too wide (a very long id), leaving others out cannot make the row fit, so every
    column stays and the row wraps."""
    shown = list(range(len(natural)))
    least = shown[: max(fixed, 1)]
    sizes = fit([natural[i] for i in least], total, [n for n, i in enumerate(least) if i in kept])
    if sum(sizes) + len(GAP) * (len(sizes) - 1) > total:
        return shown, fit(natural, total, kept)
    while True:
        sizes = fit(
            [natural[i] for i in shown], total, [n for n, i in enumerate(shown) if i in kept]
        )
        fits = sum(sizes) + len(GAP) * (len(sizes) - 1) <= total
        if fits or len(shown) <= max(fixed, 1):
            return shown, sizes
        shown.pop()


def char_width(char: str) -> int:
    """Columns a character takes on a terminal: wide (CJK) 2, combining and format marks 0."""
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal (`len` miscounts wide and combining characters)."""
    return sum(char_width(char) for char in text)


def clip(text: str, size: int) -> str:
    """`text` cut to `size` columns, ending in `…` when it was cut."""
    if display_width(text) <= size:
        return text
    room, kept = max(size - 1, 0), []
    for char in text:
        room -= char_width(char)
        if room < 0:
            break
        kept.append(char)
    return "".join(kept) + "…"


def pad(text: str, size: int) -> str:
    return text + " " * (size - display_width(text))


def wrap(text: str, size: int) -> list[str]:
    """`text` in lines of at most `size` columns, broken between words (a longer word is cut
    into pieces, never dropped)."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        joined = f"{line} {word}" if line else word
        if display_width(joined) <= size:
            line = joined
            continue
        if line:
            lines.append(line)
        line = word
        while display_width(line) > size:
            piece = clip(line, size + 1)[:-1] or line[0]
            lines.append(piece)
            line = line[len(piece) :]
    return [*lines, line]


# An instant as the API writes it (`2027-11-10T17:12:13.456Z`, or with an offset).
_INSTANT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})"
)


def _instants(cells: list[list[str]], index: int) -> bool:
    """Whether column `index` holds instants (and nothing else but `-`, none)."""
    values = [row[index] for row in cells if row[index] != "-"]
    return bool(values) and all(_INSTANT.fullmatch(value) for value in values)


def table(
    rows: Iterable[dict[str, Any]],
    columns: Sequence[Column],
    whole: int = 0,
    sample: int | None = None,
    wrap_last: bool = False,
) -> None:
    """Aligned columns; long cells are cut with an ellipsis so a row does not wrap, except in
    the first `whole` columns (ids another command takes are printed whole) and in a column of
    instants (`2027-11-10T17:12:1…` is no time at all: read, it misleads). A cut column keeps
    `CUT_FLOOR` columns; a row that cannot fit so leaves out columns from the right (`layout`).

    With `sample`, the widths come from the first `sample` rows, and the rows after them are
    printed as they arrive (a list walked with `--all` streams; a whole column longer than
    its sample pushes only its own row out of line). With `wrap_last`, a long cell of the last
    column goes on under itself on the next lines instead of being cut (a sentence, such as a
    DST note, read whole).
    """
    given = iter(rows)
    first = list(itertools.islice(given, sample) if sample is not None else given)
    cells = [[cell(get(row)) for _, get in columns] for row in first]
    headers = [name for name, _ in columns]
    natural = [
        max([display_width(h)] + [display_width(r[i]) for r in cells])
        for i, h in enumerate(headers)
    ]
    kept = {index for index in range(len(headers)) if index < whole or _instants(cells, index)}
    shown, sizes = layout(natural, width(), kept, whole)
    later = ([cell(get(row)) for _, get in columns] for row in given)
    wraps = wrap_last and shown[-1] == len(headers) - 1
    for full in itertools.chain([headers], cells, later):
        line = [full[index] for index in shown]
        rest = wrap(line[-1], sizes[-1]) if wraps else []
        if rest:
            line = [*line[:-1], rest.pop(0)]
        parts = [
            pad(text if index in kept else clip(text, size), size)
            for index, text, size in zip(shown, line, sizes, strict=True)
        ]
        click.echo(GAP.join(parts).rstrip())
        for more in rest:
            click.echo(GAP.join([" " * size for size in sizes[:-1]] + [more]))


def fields(
    body: dict[str, Any], keys: Sequence[str] | None = None, stacked: Sequence[str] = ()
) -> None:
    """One object as `key  value` lines (the table form of a single resource). A key in
    `stacked` holds a list shown one element per line, so none is cut off at the edge."""
    keys = keys or list(body)
    size = max((len(k) for k in keys), default=0)
    room = max(width() - size - len(GAP), MIN_WIDTH)
    for key in keys:
        value = body.get(key)
        values = value if key in stacked and isinstance(value, list) and value else [value]
        for label, each in zip([key, *[""] * (len(values) - 1)], values, strict=True):
            click.echo(f"{label.ljust(size)}{GAP}{clip(cell(each), room)}")


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON as it reads (名前, not \\u540d\\u524d), but with the characters JSON leaves raw that a
    terminal acts on (DEL, C1 controls, bidi overrides, lone surrogates) written as \\u escapes,
    which any JSON reader reads back as the same text."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return _JSON_ACTIVE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


_JSON_ACTIVE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def emit(output: str, body: Any, show: Callable[[Any], None], items: str | None = None) -> None:
    """A single response: the API's body as JSON, or `show` for a table. For jsonl, the body on
    one line; or, when the body carries a list under `items`, one of its elements per line."""
    if output == "json":
        click.echo(dumps(body, indent=2))
    elif output == "jsonl" and items is not None:
        for item in body.get(items, []):
            click.echo(dumps(item))
    elif output == "jsonl":
        click.echo(dumps(body))
    else:
        show(body)


def stream_items(output: str, items: Iterable[dict[str, Any]]) -> int:
    """Every item, written as it arrives (memory stays flat): jsonl lines or one JSON object."""
    out = sys.stdout
    count = 0
    if output == "jsonl":
        for item in items:
            out.write(dumps(item) + "\n")
            count += 1
        return count
    # The first page arrives (or fails) before the opening is written: a request that fails at
    # once leaves stdout empty rather than holding half a JSON document.
    rest = iter(items)
    first = next(rest, None)
    out.write('{"items": [')
    for item in [] if first is None else itertools.chain([first], rest):
        out.write((",\n" if count else "\n") + dumps(item))
        count += 1
    out.write("\n]}\n" if count else "]}\n")
    return count


def hint(text: str) -> None:
    click.echo(text, err=True)
