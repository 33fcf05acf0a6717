"""`almanac schedules apply PATH [--prune] [--dry-run]`: schedules as code, for CI pipelines."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from almanac.cli.base import Cli, connected, describe, parse_document, read_text
from almanac.cli.output import dumps, emit, inert
from almanac.errors import AlmanacError
from almanac.plan import Step, body_id, check, execute, plan, refusal

SUFFIXES = (".json", ".yaml", ".yml")
PAST = {"create": "created", "update": "updated", "unchanged": "unchanged", "delete": "deleted"}


def load_bodies(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The save bodies in a file (an object or a list of them) or in a folder's files, each
    with the file it came from."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
    elif path.exists():
        files = [path]
    else:
        raise click.BadParameter(f"{path} does not exist", param_hint="PATH")
    bodies: list[tuple[str, dict[str, Any]]] = []
    seen: dict[str, Path] = {}
    for file in files:
        document = parse_document(read_text(str(file)), str(file))
        for body in document if isinstance(document, list) else [document]:
            schedule_id = body_id(body) if isinstance(body, dict) else None
            if schedule_id is None:
                raise click.BadParameter(f"{file}: every schedule needs its schedule_id")
            if schedule_id in seen:
                raise click.BadParameter(f"{file}: {schedule_id!r} is also in {seen[schedule_id]}")
            seen[schedule_id] = file
            bodies.append((str(file), body))
    return bodies


@click.command("apply")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--prune", is_flag=True, help="Delete schedules of the namespace not listed.")
@click.option(
    "--dry-run", is_flag=True, help="Print the plan, checked by the server; change nothing."
)
@connected
def apply(cli: Cli, path: Path, prune: bool, dry_run: bool) -> None:
    """Create, update (or with --prune delete) schedules so they match PATH."""
    steps = plan(cli.client, load_bodies(path), prune)
    if dry_run:
        return rehearse(cli, steps)
    refused = refusal(steps)
    if refused is not None:
        raise refused
    done: list[Step] = []
    try:
        execute(cli.client, steps, lambda step: applied(cli, step, done))
    except AlmanacError:
        # What was applied, and the failing step with its file, before the error on stderr.
        report(cli, done, dry_run=False)
        raise
    report(cli, done, dry_run=False)


def rehearse(cli: Cli, steps: list[Step]) -> None:
    """The plan with what the server would refuse (every refusal, not only the first)."""
    if not check(cli.client, steps):
        click.echo("the server cannot simulate, so it did not check the bodies", err=True)
    report(cli, steps, dry_run=True)
    refused = refusal(steps) or next((s.error for s in steps if s.error), None)
    if refused is not None:
        raise refused


def applied(cli: Cli, step: Step, done: list[Step]) -> None:
    """A step just carried out (or that failed): streamed at once in table and jsonl output."""
    done.append(step)
    if cli.output == "jsonl":
        click.echo(dumps(step.to_json()))
    elif cli.output == "table":
        show_step(step, "failed")


def report(cli: Cli, steps: list[Step], dry_run: bool) -> None:
    """The plan (or the steps carried out) in the output format asked for, with a summary of
    what it does or would do; a real apply's table lines were already streamed."""
    counts = Counter(step.action for step in steps if not (step.error and not dry_run))
    summary = {PAST[a]: counts.get(a, 0) for a in PAST}
    body = {"dry_run": dry_run, "plan": [s.to_json() for s in steps], "summary": summary}
    if cli.output == "jsonl":
        # A real apply streamed its steps as they were carried out.
        for step in steps if dry_run else []:
            click.echo(dumps(step.to_json()))
        return
    emit(cli.output, body, lambda _: show_plan(steps, summary, dry_run))


def show_plan(steps: list[Step], summary: dict[str, int], dry_run: bool) -> None:
    if dry_run:
        for step in steps:
            show_step(step, "refused")
    counts = ", ".join(f"{n} {word}" for word, n in summary.items())
    failed = next((step for step in steps if step.error), None)
    if not dry_run and failed is not None:
        click.echo(f"stopped at {failed.schedule_id}: {counts}; nothing after it was tried")
    elif dry_run:
        refused = sum(1 for step in steps if step.error)
        tail = f"; the server would refuse {refused}" if refused else ""
        click.echo(f"dry run, nothing changed: would be {counts}{tail}")
    else:
        click.echo(counts)


def show_step(step: Step, failure: str) -> None:
    changed = ""
    if step.action == "update":
        changed = f"  ({', '.join(step.changed_fields)})"
    elif step.action == "conflict":
        changed = "  (deleted: its id is never reused)"
    click.echo(f"{step.action:<10} {step.schedule_id}{changed}")
    if step.error is not None:
        text = describe(step.error).replace("\n", "\n  ")
        # A --prune delete comes from no file: name the step instead.
        where = inert(step.file) if step.file else f"delete {step.schedule_id}"
        click.echo(f"  {failure} ({where}): {text}")
