"""`flask demo seed`: fill an empty database with a living namespace for `make demo`.

Nothing is hand-inserted: workflows are deployed and schedules saved through the services, and
the last day is replayed by the real tick phases and workers under a manual clock that moves in
5-minute steps (with one hour of ticker outage), so the history holds real starts, overlap
skips, buffers, missed occurrences, failures and a waiting task.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.auth import service as auth_service
from app.cli import demo_data as data
from app.cli.failures import APP_VARIABLE, database_errors, refuse_unmigrated
from app.context import clock, database
from app.db import ClockState, Database, Namespace, Task, User
from app.db.clock import ManualClock
from app.db.rls import Scope
from app.db.session import begin_write
from app.runs import incidents, tasks, workflows
from app.runs import service as runs_service
from app.schedules import service as schedules_service
from app.schedules import store
from app.schedules.audit import CommandContext
from app.ticker.tick import PHASES, WORKERS
from app.ticker.types import TickContext, TickResult

demo = AppGroup("demo", help="A demo namespace to explore the console (make demo).")
STEP = timedelta(minutes=5)
COMMAND = CommandContext(data.USERNAME, "console", None, None)


@dataclass
class Replay:
    """The seeding run: the database, the replayed span, and what later stages act on."""

    db: Database
    config: dict[str, object]
    start: datetime
    end: datetime
    activations: dict[str, str] = field(default_factory=dict)

    def session(self) -> AbstractContextManager[Session]:
        return self.db.session()

    def namespace(self, session: Session) -> Namespace:
        return auth_service.get_namespace(session, data.NAMESPACE)

    def user(self, session: Session) -> User:
        return auth_service.get_user(session, data.USERNAME)

    def tick(self, at: datetime) -> None:
        """One real tick at `at`: every phase, then workers until idle (under the manual clock,
        which the workers read)."""
        with self.session() as session:
            begin_write(session)
            ManualClock().set(session, at)
            session.commit()
        ctx = TickContext(self.db, at, self.config, TickResult(at), time.monotonic() + 60)
        for phase in [*PHASES, *WORKERS]:
            phase(ctx)


# A stage runs at one instant of the replay (a fraction of its span).
Stage = Callable[[Replay, datetime], None]


def setup(replay: Replay, at: datetime) -> None:
    """The user, the namespace, every workflow deployed and activated, the schedules saved."""
    with replay.session() as session:
        begin_write(session)
        auth_service.create_user(session, at, data.USERNAME, data.PASSWORD)
        namespace = auth_service.create_namespace(session, at, data.NAMESPACE)
        auth_service.grant_role(session, data.USERNAME, data.NAMESPACE, "admin")
        user = replay.user(session)
        for definition in data.WORKFLOWS:
            version = workflows.deploy(session, at, namespace, definition)
            activation, _, _ = workflows.activate(session, at, namespace, definition["name"])
            replay.activations[f"{definition['name']}@{version.version}"] = activation.id
        for body in data.SCHEDULES:
            schedules_service.save(session, at, namespace, user, COMMAND, body, None)
        pinned = {
            "id": data.PINNED_ID,
            "spec": {"cron_expressions": ["45 * * * *"], "timezone": "Europe/Madrid"},
            "action": {"activation_id": replay.activations["invoice-sync@1"], "input": {}},
            "notes": "Pinned to invoice-sync v1 before v2 shipped",
        }
        schedules_service.save(session, at, namespace, user, COMMAND, pinned, None)
        session.commit()


def ship_v2(replay: Replay, at: datetime) -> None:
    """Deploy invoice-sync v2, activate it, retire v1: the pinned schedule blocks."""
    with replay.session() as session:
        namespace = replay.namespace(session)
        definition = data.WORKFLOWS[1] | {"description": "Pull invoices, now with retries"}
        workflows.deploy(session, at, namespace, definition)
        workflows.activate(session, at, namespace, "invoice-sync")
        workflows.retire(session, at, namespace, replay.activations["invoice-sync@1"])
        session.commit()


def pause_vendor(replay: Replay, at: datetime) -> None:
    with replay.session() as session:
        namespace, user = replay.namespace(session), replay.user(session)
        paused = CommandContext(data.USERNAME, "console", None, data.PAUSE_REASON)
        revision = store.get(session, namespace, data.PAUSED_ID).revision
        schedules_service.pause(
            session, at, namespace, user, paused, data.PAUSED_ID, revision, data.PAUSE_REASON
        )
        session.commit()


def ask_for_review(replay: Replay, at: datetime) -> None:
    """A run started by hand (not by a schedule); its task waits for a person."""
    with replay.session() as session:
        number = 1 + (at - replay.start > (replay.end - replay.start) / 2)
        request = runs_service.RunRequest(
            workflow="payout-approval", run_id=f"payout-review-{number}", input={"batch": number}
        )
        runs_service.start(session, at, replay.namespace(session), request)
        session.commit()


def approve_open_tasks(replay: Replay, at: datetime) -> None:
    """Someone approves every task open at `at` (later tasks stay open: the inbox has one)."""
    with replay.session() as session:
        namespace, user = replay.namespace(session), replay.user(session)
        query = select(Task.id).where(Task.namespace_id == namespace.id, Task.status == "open")
        for task_id in list(session.scalars(query)):
            tasks.complete(session, at, namespace, user, task_id, {"approved": True})
            session.commit()


def _start(replay: Replay, at: datetime, workflow: str, run_id: str) -> None:
    with replay.session() as session:
        request = runs_service.RunRequest(workflow=workflow, run_id=run_id, input={})
        runs_service.start(session, at, replay.namespace(session), request)
        session.commit()


def sync_regions(replay: Replay, at: datetime) -> None:
    """A run with parallel branches (two regions at a time), started by hand."""
    _start(replay, at, "region-sync", f"region-sync-{at:%H%M}")


def charge_cards(replay: Replay, at: datetime) -> None:
    """A card batch whose charge step fails into an incident: the run is suspended."""
    _start(replay, at, "card-charge", f"card-charge-{at:%H%M}")


def skip_open_incidents(replay: Replay, at: datetime) -> None:
    """An operator skips every incident open at `at` (later ones stay open on the page)."""
    with replay.session() as session:
        namespace = replay.namespace(session)
        rows, _ = incidents.list_incidents(session, namespace, 100, None, status="open")
        for incident, run_id in rows:
            output = {"charged": False, "note": "retried by hand at the gateway"}
            incidents.resolve(session, at, namespace, run_id, incident.id, "skip", output)
            session.commit()


# Each stage at a fraction of the replayed span, so a shorter replay keeps every feature.
STAGES: list[tuple[float, Stage]] = [
    (0, setup),
    (1 / 12, ask_for_review),
    (1 / 8, sync_regions),
    (1 / 6, charge_cards),
    (1 / 4, approve_open_tasks),
    (3 / 8, ship_v2),
    (1 / 2, pause_vendor),
    (7 / 12, skip_open_incidents),
    (3 / 4, sync_regions),
    (5 / 6, charge_cards),
    # Left waiting: the inbox has a task whatever the day's calendars did.
    (11 / 12, ask_for_review),
]
# The ticker is down for this part of the replay: missed occurrences are skipped or fired once.
OUTAGE = (5 / 8, 2 / 3)


def replay_day(replay: Replay) -> int:
    """Tick every 5 minutes from `start` to `end`, running each stage at its instant."""
    span = replay.end - replay.start
    steps = int(span / STEP)
    due = {round(fraction * steps): stage for fraction, stage in STAGES}
    ticks = 0
    for index in range(steps + 1):
        at = replay.start + index * STEP
        if index in due:
            due[index](replay, at)
        if not OUTAGE[0] * steps <= index < OUTAGE[1] * steps:
            replay.tick(at)
            ticks += 1
    return ticks


@demo.command("seed")
@click.option("--hours", type=int, default=24, show_default=True, help="History to replay.")
def seed(hours: int) -> None:
    """Fill an empty database with the demo namespace and a replayed day of history."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    # A trusted tool seeding every table: on PostgreSQL an unscoped session may write no
    # namespace's rows under row security.
    db = database(app).bound(Scope.all())
    # Away, refused or not migrated for this version: one line, before anything is written.
    refuse_unmigrated(db.engine, APP_VARIABLE)
    with database_errors(APP_VARIABLE, tables=True), db.session() as session:
        if session.scalar(select(Namespace.id).where(Namespace.name == data.NAMESPACE)):
            raise click.ClickException(f"namespace {data.NAMESPACE!r} exists: use a fresh file")
    served = clock(app)
    with db.session() as session:
        end = served.now(session).replace(second=0, microsecond=0)
    end -= timedelta(minutes=end.minute % 5)
    # The replay ticks every 5 minutes where a live ticker ticks every second: its grace for a
    # late occurrence is one step, or every jittered fire would count as missed.
    grace = STEP.total_seconds()
    config = dict(app.config) | {"CLOCK": "manual", "TESTING": True, "MISFIRE_GRACE_SECONDS": grace}
    replay = Replay(db, config, end - timedelta(hours=hours), end)
    began = time.monotonic()
    ticks = replay_day(replay)
    with db.session() as session:
        # Leave the served clock as it was: a system clock ignores the replay's instant.
        session.execute(delete(ClockState))
        if served.manual:
            served.set(session, end)  # type: ignore[union-attr]
        session.commit()
    click.echo(
        f"Seeded namespace {data.NAMESPACE!r}: {len(data.WORKFLOWS)} workflows, "
        f"{len(data.SCHEDULES) + 1} schedules, {ticks} ticks over {hours} h "
        f"in {time.monotonic() - began:.0f} s."
    )
    click.echo(f"Sign in as {data.USERNAME!r} with password {data.PASSWORD!r}.")
