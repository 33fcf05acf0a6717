"""`almanac runs|incidents|tasks ...`."""

from __future__ import annotations

from typing import Any

import click

from almanac.cli.base import Cli, connected, json_option
from almanac.cli.listing import page_options, show_pages
from almanac.cli.output import emit, fields

RUN_FIELDS = (
    "run_id",
    "workflow",
    "version",
    "status",
    "schedule_id",
    "current_step",
    "input",
    "output",
    "error",
    "created_at",
    "started_at",
    "finished_at",
)
RUN_COLUMNS = [
    ("Run", lambda r: r.get("run_id")),
    ("Workflow", lambda r: r.get("workflow")),
    ("Status", lambda r: r.get("status")),
    ("Step", lambda r: r.get("current_step")),
    ("Created At", lambda r: r.get("created_at")),
]
EVENT_COLUMNS = [
    ("Seq", lambda e: e.get("sequence")),
    ("Event", lambda e: e.get("event_type")),
    ("Node", lambda e: e.get("node_id")),
    ("Recorded At", lambda e: e.get("recorded_at")),
]
TASK_COLUMNS = [
    ("ID", lambda t: t.get("id")),
    ("Run", lambda t: t.get("run_id")),
    ("Title", lambda t: t.get("title")),
    ("Status", lambda t: t.get("status")),
    ("Due At", lambda t: t.get("due_at")),
]
INCIDENT_COLUMNS = [
    ("ID", lambda i: i.get("id")),
    ("Run", lambda i: i.get("run_id")),
    ("Node", lambda i: i.get("node_id")),
    ("Opened At", lambda i: i.get("opened_at")),
    ("Resolution", lambda i: i.get("resolution")),
]


def show_run(body: dict[str, Any]) -> None:
    fields(body, RUN_FIELDS)


@click.group("runs")
def runs() -> None:
    """Runs: start, list, show, history, signal, cancel, terminate, replay."""


@runs.command("start")
@click.argument("workflow")
@click.option("--input", "input_", help="Run input as JSON.")
@click.option("--run-id", help="Idempotency key: the same id answers the existing run.")
@connected
def start(cli: Cli, workflow: str, input_: str | None, run_id: str | None) -> None:
    """Start a run of WORKFLOW's newest ready activation."""
    run = cli.client.start_run(workflow, input=json_option(input_, "--input"), run_id=run_id)
    emit(cli.output, run.raw, show_run)


@runs.command("list")
@click.option("--status", help="Comma-separated statuses.")
@click.option("--workflow")
@click.option("--schedule-id")
@page_options
@connected
def list_(
    cli: Cli,
    status: str | None,
    workflow: str | None,
    schedule_id: str | None,
    limit: int | None,
    cursor: str | None,
    every: bool,
) -> None:
    """List runs, newest first."""
    pager = cli.client.list_runs(
        status=status, workflow=workflow, schedule_id=schedule_id, limit=limit, cursor=cursor
    )
    show_pages(cli, pager, RUN_COLUMNS, every)


@runs.command("show")
@click.argument("run_id")
@connected
def show(cli: Cli, run_id: str) -> None:
    """Show one run."""
    emit(cli.output, cli.client.get_run(run_id).raw, show_run)


@runs.command("history")
@click.argument("run_id")
@page_options
@connected
def history(cli: Cli, run_id: str, limit: int | None, cursor: str | None, every: bool) -> None:
    """A run's history events in order."""
    pager = cli.client.iter_run_history(run_id, limit=limit, cursor=cursor)
    show_pages(cli, pager, EVENT_COLUMNS, every)


@runs.command("signal")
@click.argument("run_id")
@click.argument("name")
@click.option("--payload", help="Signal payload as JSON.")
@connected
def signal(cli: Cli, run_id: str, name: str, payload: str | None) -> None:
    """Send the signal NAME to a run."""
    result = cli.client.signal_run(run_id, name, json_option(payload, "--payload"))
    emit(cli.output, result.raw, fields)


@runs.command("cancel")
@click.argument("run_id")
@click.option("--reason")
@connected
def cancel(cli: Cli, run_id: str, reason: str | None) -> None:
    """Cancel a run at its next step boundary."""
    emit(cli.output, cli.client.cancel_run(run_id, reason).raw, show_run)


@runs.command("terminate")
@click.argument("run_id")
@click.option("--reason")
@connected
def terminate(cli: Cli, run_id: str, reason: str | None) -> None:
    """Terminate a run immediately."""
    emit(cli.output, cli.client.terminate_run(run_id, reason).raw, show_run)


@runs.command("replay")
@click.argument("run_id")
@connected
def replay(cli: Cli, run_id: str) -> None:
    """Rebuild a run's state from its history and compare it with the stored one."""
    result = cli.client.replay_run(run_id)
    emit(cli.output, result.raw, lambda body: fields(body, ("agree", "replayed", "stored")))


@click.group("incidents")
def incidents() -> None:
    """Incidents opened by failed steps: list and resolve."""


@incidents.command("list")
@click.option("--status", type=click.Choice(["open", "resolved"]))
@page_options
@connected
def list_incidents(
    cli: Cli, status: str | None, limit: int | None, cursor: str | None, every: bool
) -> None:
    """List the namespace's incidents."""
    pager = cli.client.list_incidents(status=status, limit=limit, cursor=cursor)
    show_pages(cli, pager, INCIDENT_COLUMNS, every)


@incidents.command("resolve")
@click.argument("incident_id")
@click.option("--action", required=True, type=click.Choice(["retry", "skip", "fail"]))
@click.option("--output-json", "--output-value", "value", help="The skipped step's output (JSON).")
@click.option("--run", "run_id", help="The incident's run (looked up when omitted).")
@connected
def resolve(cli: Cli, incident_id: str, action: str, value: str | None, run_id: str | None) -> None:
    """Resolve an incident: retry the step, skip it (with an output), or fail the run."""
    run_id = run_id or cli.client.find_incident(incident_id).run_id
    resolved = cli.client.resolve_incident(
        run_id, incident_id, action, json_option(value, "--output-json")
    )
    emit(cli.output, resolved.raw, fields)


@click.group("tasks")
def tasks() -> None:
    """Human tasks: list and complete."""


@tasks.command("list")
@click.option("--status", type=click.Choice(["open", "completed", "timed_out", "cancelled"]))
@page_options
@connected
def list_tasks(
    cli: Cli, status: str | None, limit: int | None, cursor: str | None, every: bool
) -> None:
    """List human tasks, newest first."""
    pager = cli.client.list_tasks(status=status, limit=limit, cursor=cursor)
    show_pages(cli, pager, TASK_COLUMNS, every)


@tasks.command("complete")
@click.argument("task_id")
@click.option("--output-json", "--result", "value", required=True, help="Task output (JSON).")
@connected
def complete(cli: Cli, task_id: str, value: str) -> None:
    """Complete an open task with a JSON output."""
    task = cli.client.complete_task(task_id, json_option(value, "--output-json"))
    emit(cli.output, task.raw, fields)
