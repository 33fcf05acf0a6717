"""`almanac schedules ...`: save, read, list, history, occurrences, state changes, trigger,
backfill and simulate (`apply` lives in its own module)."""

from __future__ import annotations

import sys
from typing import Any

import click

from almanac.cli.base import Cli, connected, read_document
from almanac.cli.listing import show_pages
from almanac.cli.output import emit, fields, table

POLICIES = ("skip", "buffer_one", "buffer_all", "allow_all", "cancel_other", "terminate_other")
SCHEDULE_FIELDS = (
    "schedule_id",
    "revision",
    "status",
    "blocked_reason",
    "paused_reason",
    "spec",
    "action",
    "overlap_policy",
    "next_fire_at",
    "last_fired_at",
    "fires_count",
    "skipped_trigger_count",
    "principal",
    "labels",
)


def calendar_text(row: dict[str, Any]) -> str:
    spec = row.get("spec") or {}
    parts = list(spec.get("cron_expressions") or [])
    # The offset too: `every PT6H` for PT6H offset PT5M named another calendar.
    parts += [_interval_text(i) for i in spec.get("intervals") or []]
    return "; ".join(parts) + f" ({spec.get('timezone', 'UTC')})"


def _interval_text(interval: dict[str, Any]) -> str:
    offset = interval.get("offset")
    text = f"every {interval.get('every')}"
    return f"{text} offset {offset}" if offset and offset != "PT0S" else text


def workflow_text(row: dict[str, Any]) -> str:
    action = row.get("action") or {}
    return str(action.get("workflow") or action.get("activation_id") or "-")


SCHEDULE_COLUMNS = [
    ("ID", lambda r: r.get("schedule_id")),
    ("Status", lambda r: r.get("status")),
    ("Rev", lambda r: r.get("revision")),
    ("Workflow", workflow_text),
    ("Next Fire", lambda r: r.get("next_fire_at")),
    ("Calendar", calendar_text),
]
HISTORY_COLUMNS = [
    ("Seq", lambda e: e.get("sequence")),
    ("Event", lambda e: e.get("event_type")),
    ("Recorded At", lambda e: e.get("recorded_at")),
    ("Workflow Refs", lambda e: workflow_refs(e)),
]
OCCURRENCE_COLUMNS = [
    ("Kind", lambda o: o.get("kind")),
    ("Instant", lambda o: o.get("instant")),
    ("Through", lambda o: o.get("through")),
    ("Reason", lambda o: o.get("reason")),
    ("Run", lambda o: o.get("run_id")),
]


def workflow_refs(event: dict[str, Any]) -> str:
    refs = [event.get("workflow_instance_id"), event.get("workflow_run_id")]
    return " / ".join(dict.fromkeys(str(r) for r in refs if r)) or "-"


def show_schedule(body: dict[str, Any]) -> None:
    # `read` answers the next due times too (saving answers none): one per line, with its note.
    upcoming = body.get("upcoming")
    if isinstance(upcoming, list):
        due = [due_text(item) for item in upcoming] or None
        fields(body | {"upcoming": due}, (*SCHEDULE_FIELDS, "upcoming"), stacked=("upcoming",))
    else:
        fields(body, SCHEDULE_FIELDS)


def due_text(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    note = item.get("note")
    return f"{item.get('at')} ({note})" if note else item.get("at")


@click.group("schedules")
def schedules() -> None:
    """Schedules: save, read, list, history, pause/resume, trigger, backfill, apply."""


@schedules.command("save")
@click.option("--request", "request_path", required=True, help="JSON file with the save body.")
@click.option("--revision", type=int, help="Replace the schedule at this revision (If-Match).")
@connected
def save(cli: Cli, request_path: str, revision: int | None) -> None:
    """Create a schedule, or replace one at --revision (FILE `-` reads stdin)."""
    body = read_document(request_path)
    if not isinstance(body, dict):
        raise click.BadParameter("the request must be a JSON object", param_hint="--request")
    emit(cli.output, cli.client.save_schedule(body, revision).raw, show_schedule)


@schedules.command("read")
@click.argument("schedule_id")
@connected
def read(cli: Cli, schedule_id: str) -> None:
    """Show one schedule (deleted ones too) with its upcoming due times."""
    emit(cli.output, cli.client.get_schedule(schedule_id).raw, show_schedule)


def label_pair(raw: str) -> tuple[str, str]:
    """A `--label` filter, read as the server reads it: the first ':' or '=' separates the key
    from the value; without either it is a usage error (it would silently match nothing)."""
    cut = min((i for i in (raw.find(":"), raw.find("=")) if i >= 0), default=-1)
    if cut <= 0:
        raise click.BadParameter(f"{raw!r} is not key:value (or key=value)", param_hint="--label")
    return raw[:cut].strip(), raw[cut + 1 :].strip()


@schedules.command("list")
@click.option("--status", type=click.Choice(["active", "paused", "blocked", "deleted"]))
@click.option(
    "--label",
    "labels",
    multiple=True,
    callback=lambda _ctx, _param, values: [label_pair(v) for v in values],
    help="key:value or key=value (repeatable; all must match).",
)
@click.option("--q", help="Text in the id, notes or workflow.")
@click.option("--include-deleted", is_flag=True)
@click.option("--limit", type=click.IntRange(1, 100))
@click.option("--cursor")
@click.option("--all", "every", is_flag=True, help="Walk every page.")
@connected
def list_(
    cli: Cli,
    status: str | None,
    labels: list[tuple[str, str]],
    q: str | None,
    include_deleted: bool,
    limit: int | None,
    cursor: str | None,
    every: bool,
) -> None:
    """List schedules, newest first."""
    pager = cli.client.list_schedules(
        status=status,
        labels=labels,
        q=q,
        include_deleted=include_deleted,
        limit=limit,
        cursor=cursor,
    )
    show_pages(cli, pager, SCHEDULE_COLUMNS, every)


@schedules.command("history")
@click.argument("schedule_id")
@click.option("--limit", type=click.IntRange(1, 500), help="Events per page (default 100).")
@click.option("--after-sequence", type=click.IntRange(min=0))
@click.option("--all", "every", is_flag=True, help="Walk every remaining page.")
@connected
def history(
    cli: Cli, schedule_id: str, limit: int | None, after_sequence: int | None, every: bool
) -> None:
    """The schedule's audit stream: Seq, Event, Recorded At, Workflow Refs."""
    if every:
        # Pages of 500 (the server's maximum) unless --limit says otherwise: fewer round trips.
        pager = cli.client.iter_schedule_history(
            schedule_id, limit=limit or 500, after_sequence=after_sequence
        )
    else:
        pager = cli.client.iter_schedule_history(
            schedule_id, limit=limit, after_sequence=after_sequence
        )
    show_pages(cli, pager, HISTORY_COLUMNS, every, history=True)


@schedules.command("occurrences")
@click.argument("schedule_id")
@click.option("--limit", type=click.IntRange(1, 100))
@click.option("--cursor")
@click.option("--all", "every", is_flag=True)
@connected
def occurrences(
    cli: Cli, schedule_id: str, limit: int | None, cursor: str | None, every: bool
) -> None:
    """The occurrence ledger: started, buffered and skipped occurrences, newest first."""
    pager = cli.client.list_occurrences(schedule_id, limit=limit, cursor=cursor)
    show_pages(cli, pager, OCCURRENCE_COLUMNS, every)


def _state_command(verb: str, summary: str) -> None:
    @schedules.command(verb, help=summary)
    @click.argument("schedule_id")
    @click.option("--revision", type=int, required=True, help="The revision you read (If-Match).")
    @click.option("--reason")
    @connected
    def change(cli: Cli, schedule_id: str, revision: int, reason: str | None) -> None:
        method = getattr(cli.client, f"{verb}_schedule")
        emit(cli.output, method(schedule_id, revision, reason).raw, show_schedule)


for _verb, _summary in (
    ("pause", "Pause a schedule: it never fires until resumed."),
    ("resume", "Resume a schedule from now on, without catch-up."),
    ("disable", "Alias of pause."),
    ("enable", "Alias of resume."),
    ("delete", "Delete a schedule (soft: its history stays readable)."),
):
    _state_command(_verb, _summary)


@schedules.command("trigger")
@click.argument("schedule_id")
@click.option("--overlap-policy", type=click.Choice(POLICIES))
@click.option("--reason", help="Why, for the schedule's history.")
@connected
def trigger(cli: Cli, schedule_id: str, overlap_policy: str | None, reason: str | None) -> None:
    """Start a run now under the overlap policy (or the one given)."""
    result = cli.client.trigger_schedule(schedule_id, overlap_policy=overlap_policy, reason=reason)
    emit(cli.output, result.raw, fields)


@schedules.command("backfill")
@click.argument("schedule_id")
@click.option(
    "--from", "from_", required=True, help="Start instant (inclusive), e.g. 2026-01-01T00:00:00Z."
)
@click.option("--to", required=True, help="End instant (exclusive).")
@click.option(
    "--overlap-policy",
    type=click.Choice(POLICIES),
    help="Instead of the schedule's; under skip (the default) only the first occurrence starts, "
    "so pass allow_all to start every one.",
)
@click.option("--reason", help="Why, for the schedule's history.")
@connected
def backfill(
    cli: Cli,
    schedule_id: str,
    from_: str,
    to: str,
    overlap_policy: str | None,
    reason: str | None,
) -> None:
    """Start one run per occurrence in [from, to); large ranges go in several requests."""
    bar = click.progressbar(length=1000, label="backfill", file=sys.stderr)
    shown = [0]

    def progress(fraction: float) -> None:
        step = int(fraction * 1000) - shown[0]
        shown[0] += step
        bar.update(step)

    try:
        result = cli.client.backfill_schedule(
            schedule_id,
            from_,
            to,
            overlap_policy=overlap_policy,
            reason=reason,
            progress=progress if sys.stderr.isatty() else None,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    finally:
        if sys.stderr.isatty():
            bar.render_finish()
    emit(cli.output, result.raw, show_backfill, items="results")


def show_backfill(body: dict[str, Any]) -> None:
    results = body.get("results", [])
    already = sum(1 for r in results if r.get("outcome") == "already_started")
    summary = {
        "started": body.get("started"),
        "skipped": body.get("skipped"),
        "already_started": already,
        "occurrences": len(results),
        "requests": body.get("requests", 1),
    }
    fields(summary)


@schedules.command("simulate")
@click.argument("schedule_id")
@click.option("--from", "from_", required=True)
@click.option("--to", required=True)
@click.option("--run-duration", help="Assumed length of every run, ISO-8601 (default PT0S).")
@connected
def simulate(cli: Cli, schedule_id: str, from_: str, to: str, run_duration: str | None) -> None:
    """What the schedule would do over [from, to): computed, nothing is written."""
    result = cli.client.simulate_schedule(schedule_id, from_, to, run_duration)
    emit(cli.output, result.raw, show_simulation, items="items")


def show_simulation(body: dict[str, Any]) -> None:
    table(
        body.get("items", []),
        [
            ("Occurrence", lambda i: i.get("occurrence_time")),
            ("Outcome", lambda i: i.get("outcome")),
            ("Reason", lambda i: i.get("reason")),
            ("Starts", lambda i: i.get("starts_at")),
            ("Ends", lambda i: i.get("ends_at")),
        ],
    )
    summary = body.get("summary") or {}
    click.echo(", ".join(f"{k} {v}" for k, v in summary.items()))
    if body.get("truncated"):
        click.echo("(truncated at 1000 occurrences)")
