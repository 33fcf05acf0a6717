"""`almanac workflows|activations|calendar ...`."""

from __future__ import annotations

from typing import Any

import click

from almanac.cli.base import Cli, connected, read_document
from almanac.cli.listing import page_options, show_pages
from almanac.cli.output import emit, fields, table

WORKFLOW_COLUMNS = [
    ("Name", lambda w: w.get("name")),
    ("Version", lambda w: w.get("version")),
    ("Steps", lambda w: len((w.get("definition") or {}).get("steps") or [])),
    ("Updated At", lambda w: w.get("updated_at") or w.get("created_at")),
]
ACTIVATION_COLUMNS = [
    ("ID", lambda a: a.get("id")),
    ("Workflow", lambda a: a.get("workflow")),
    ("Version", lambda a: a.get("version")),
    ("Status", lambda a: a.get("status")),
    ("Created At", lambda a: a.get("created_at")),
]


def show_workflow(body: dict[str, Any]) -> None:
    fields(body, ("name", "version", "created_at", "definition", "versions"))


@click.group("workflows")
def workflows() -> None:
    """Workflow definitions: deploy, list, show."""


@workflows.command("deploy")
@click.argument("path")
@connected
def deploy(cli: Cli, path: str) -> None:
    """Deploy the definition in PATH (JSON, or `-` for stdin) as the next version."""
    definition = read_document(path)
    if not isinstance(definition, dict):
        raise click.BadParameter("the definition must be a JSON object", param_hint="PATH")
    emit(cli.output, cli.client.deploy_workflow(definition).raw, show_workflow)


@workflows.command("list")
@page_options
@connected
def list_(cli: Cli, limit: int | None, cursor: str | None, every: bool) -> None:
    """List workflows with their newest version."""
    pager = cli.client.list_workflows(limit=limit, cursor=cursor)
    show_pages(cli, pager, WORKFLOW_COLUMNS, every)


@workflows.command("show")
@click.argument("name")
@click.option("--version", type=int)
@connected
def show(cli: Cli, name: str, version: int | None) -> None:
    """Show a workflow's newest (or given) version."""
    emit(cli.output, cli.client.get_workflow(name, version=version).raw, show_workflow)


@click.group("activations")
def activations() -> None:
    """Activations make a workflow version runnable."""


@activations.command("create")
@click.argument("workflow")
@click.option("--version", type=int, help="Default: the newest version.")
@connected
def create(cli: Cli, workflow: str, version: int | None) -> None:
    """Activate a version of WORKFLOW."""
    emit(cli.output, cli.client.create_activation(workflow, version=version).raw, fields)


@activations.command("list")
@click.option("--workflow")
@click.option("--status", type=click.Choice(["ready", "retired"]))
@page_options
@connected
def list_activations(
    cli: Cli,
    workflow: str | None,
    status: str | None,
    limit: int | None,
    cursor: str | None,
    every: bool,
) -> None:
    """List activations, newest first."""
    pager = cli.client.list_activations(
        workflow=workflow, status=status, limit=limit, cursor=cursor
    )
    show_pages(cli, pager, ACTIVATION_COLUMNS, every)


@activations.command("retire")
@click.argument("activation_id")
@connected
def retire(cli: Cli, activation_id: str) -> None:
    """Retire an activation: no new run starts from it."""
    emit(cli.output, cli.client.retire_activation(activation_id).raw, fields)


@click.group("calendar")
def calendar() -> None:
    """Calendar tools."""


def interval(text: str) -> dict[str, str]:
    every, _, offset = text.partition("/")
    return {"every": every, "offset": offset} if offset else {"every": every}


@calendar.command("preview")
@click.option("--cron", "crons", multiple=True, help="A cron expression (repeatable).")
@click.option("--interval", "intervals", multiple=True, help="EVERY[/OFFSET], e.g. PT6H/PT5M.")
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--count", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--jitter", type=click.IntRange(0, 3600), help="Jitter seconds, as a save takes.")
@click.option("--schedule", "schedule_id", help="Preview as this schedule: its jitter and cursor.")
@connected
def preview(
    cli: Cli,
    crons: tuple[str, ...],
    intervals: tuple[str, ...],
    timezone: str,
    count: int,
    jitter: int | None,
    schedule_id: str | None,
) -> None:
    """The next due times of a calendar, with DST notes."""
    if not crons and not intervals:
        raise click.UsageError("give at least one --cron or --interval")
    spec = {
        "cron_expressions": list(crons),
        "intervals": [interval(i) for i in intervals],
        "timezone": timezone,
    }
    items = cli.client.preview_calendar(
        spec, count=count, jitter_seconds=jitter, schedule_id=schedule_id
    )
    body = {"occurrences": [item.raw for item in items]}
    columns = [
        ("At (UTC)", lambda o: o.get("at")),
        ("Local", lambda o: o.get("local")),
        ("Offset", lambda o: o.get("utc_offset")),
        ("Note", lambda o: o.get("note")),
    ]

    def show(found: dict[str, Any]) -> None:
        # Times are printed whole and the DST note wraps under itself: cut, neither is read.
        table(found["occurrences"], columns, whole=3, wrap_last=True)

    emit(cli.output, body, show, items="occurrences")
