"""The schedules harness, a pytest plugin (see tests/conftest.py): workflows and activations as
rows, and `h`, which drives the clock, ticks and runs.

Workflows are inserted with the models (not through the workflows API) so these tests do not
depend on the runs engineer's routes; runs are ended with app.runs.lifecycle directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select

from app.calendar import format_utc, parse_instant
from app.context import clock, database
from app.db import (
    Activation,
    Namespace,
    Run,
    RunHistoryEvent,
    Schedule,
    ScheduleHistoryEvent,
    ScheduleOccurrence,
    ScheduleRevision,
    User,
    Workflow,
    WorkflowVersion,
)
from app.runs import lifecycle
from app.ticker.tick import run_tick
from tests.conftest import FIXED_NOW, Api

SCHEDULE_TABLES = (Schedule, ScheduleRevision, ScheduleOccurrence, ScheduleHistoryEvent, Run)


def at(text: str) -> datetime:
    """`"12:05"` on FIXED_NOW's day, or a full ISO instant."""
    if len(text) <= 8:
        hour, minute, *rest = (int(part) for part in text.split(":"))
        return FIXED_NOW.replace(hour=hour, minute=minute, second=rest[0] if rest else 0)
    return parse_instant(text)


class Harness:
    """Drives one app: workflows, the manual clock, ticks, runs and table counts."""

    def __init__(self, app: Flask, api: Api) -> None:
        self.app = app
        self.api = api
        self.db = database(app)

    # --- workflows ------------------------------------------------------------------------

    def workflow(
        self,
        name: str = "invoice-sync",
        namespace: str = "default",
        input_schema: dict[str, Any] | None = None,
        timeout_seconds: int | None = None,
    ) -> str:
        """Insert a workflow, its next version and a ready activation; return the activation id."""
        with self.db.session() as session:
            ns = session.scalar(select(Namespace).where(Namespace.name == namespace))
            if ns is None:
                ns = Namespace(name=namespace, created_at=FIXED_NOW)
                session.add(ns)
                session.flush()
            flow = session.scalar(
                select(Workflow).where(Workflow.namespace_id == ns.id, Workflow.name == name)
            )
            if flow is None:
                flow = Workflow(namespace_id=ns.id, name=name, created_at=FIXED_NOW)
                session.add(flow)
                session.flush()
            number = (
                session.scalar(
                    select(func.max(WorkflowVersion.version)).where(
                        WorkflowVersion.workflow_id == flow.id
                    )
                )
                or 0
            ) + 1
            definition: dict[str, Any] = {
                "name": name,
                "input_schema": input_schema or {"type": "object"},
                "steps": [{"id": "a", "type": "action", "action": "noop"}],
            }
            if timeout_seconds:
                definition["timeout_seconds"] = timeout_seconds
            version = WorkflowVersion(
                workflow_id=flow.id, version=number, definition=definition, created_at=FIXED_NOW
            )
            session.add(version)
            session.flush()
            activation = Activation(
                namespace_id=ns.id,
                workflow_id=flow.id,
                workflow_version_id=version.id,
                status="ready",
                created_at=FIXED_NOW + timedelta(seconds=number),
            )
            session.add(activation)
            session.commit()
            return activation.id

    def retire(self, activation_id: str) -> None:
        with self.db.session() as session:
            activation = session.get(Activation, activation_id)
            assert activation is not None
            activation.status, activation.retired_at = "retired", FIXED_NOW
            session.commit()

    def disable_user(self, username: str) -> None:
        with self.db.session() as session:
            user = session.scalar(select(User).where(User.username == username))
            assert user is not None
            user.disabled_at = FIXED_NOW
            session.commit()

    def set_limit(self, max_active_runs: int | None, namespace: str = "default") -> None:
        with self.db.session() as session:
            ns = session.scalar(select(Namespace).where(Namespace.name == namespace))
            assert ns is not None
            ns.max_active_runs = max_active_runs
            session.commit()

    # --- schedules through the API ---------------------------------------------------------

    def save(
        self,
        body: dict[str, Any],
        revision: int | None = None,
        api: Api | None = None,
        expect: int | None = None,
    ) -> dict[str, Any]:
        headers = {} if revision is None else {"If-Match": f'"{revision}"'}
        response = (api or self.api).post("/schedules", json=body, headers=headers)
        if expect is not None:
            assert response.status_code == expect, response.get_json()
        return response.get_json()

    def create(self, schedule_id: str = "s", cron: str = "*/5 * * * *", **fields: Any) -> dict:
        activation = fields.pop("activation_id", None) or self.workflow()
        body = {"id": schedule_id, "cron": cron, "activation_id": activation, "input": {}}
        return self.save(body | fields, expect=201)

    def read(self, schedule_id: str = "s") -> dict[str, Any]:
        response = self.api.get(f"/schedules/{schedule_id}")
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def post(
        self,
        schedule_id: str,
        verb: str,
        body: dict[str, Any] | None = None,
        revision: int | None = None,
        api: Api | None = None,
    ) -> Any:
        if revision is None:
            revision = self.read(schedule_id)["revision"]
        return (api or self.api).post(
            f"/schedules/{schedule_id}/{verb}", json=body or {}, headers={"If-Match": str(revision)}
        )

    def ledger(self, schedule_id: str = "s") -> list[dict[str, Any]]:
        """Every ledger row, oldest first."""
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = "?limit=100" + (f"&cursor={cursor}" if cursor else "")
            body = self.api.get(f"/schedules/{schedule_id}/occurrences{query}").get_json()
            items.extend(body["items"])
            cursor = body["next_cursor"]
            if cursor is None:
                return items[::-1]

    def history(self, schedule_id: str = "s") -> list[dict[str, Any]]:
        body = self.api.get(f"/schedules/{schedule_id}/history?limit=500").get_json()
        return body["events"]

    def event_types(self, schedule_id: str = "s") -> list[str]:
        return [event["event_type"] for event in self.history(schedule_id)]

    # --- the clock, ticks and runs ----------------------------------------------------------

    def set_clock(self, instant: datetime | str) -> datetime:
        when = at(instant) if isinstance(instant, str) else instant
        with self.db.session() as session:
            clock(self.app).set(session, when)  # type: ignore[union-attr]
            session.commit()
        return when

    def tick(self, instant: datetime | str | None = None) -> list[dict[str, Any]]:
        if instant is not None:
            self.set_clock(instant)
        return run_tick(self.app).rows

    def runs(self, schedule_id: str | None = None) -> list[Run]:
        with self.db.session() as session:
            query = select(Run).order_by(Run.id)
            if schedule_id is not None:
                query = query.where(Run.schedule_id == schedule_id)
            return list(session.scalars(query))

    def run_events(self, run_id: str) -> list[RunHistoryEvent]:
        with self.db.session() as session:
            run = session.scalar(select(Run).where(Run.run_id == run_id))
            assert run is not None
            return list(
                session.scalars(
                    select(RunHistoryEvent)
                    .where(RunHistoryEvent.run_pk == run.id)
                    .order_by(RunHistoryEvent.sequence)
                )
            )

    def finish(self, run_id: str | None = None, status: str = "completed") -> None:
        """End one run (or every active one) as a worker would."""
        with self.db.session() as session:
            query = select(Run).where(Run.status.in_(("pending", "running", "waiting")))
            if run_id is not None:
                query = query.where(Run.run_id == run_id)
            for run in session.scalars(query):
                lifecycle.finish_run(session, run, FIXED_NOW, status, f"run_{status}", {})
            session.commit()

    def counts(self) -> dict[str, int]:
        with self.db.session() as session:
            return {
                model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
                for model in SCHEDULE_TABLES
            }


@pytest.fixture
def operator(api_for: Any) -> Api:
    return api_for("olga", "operator")  # type: ignore[no-any-return]


@pytest.fixture
def h(app: Flask, operator: Api) -> Iterator[Harness]:
    yield Harness(app, operator)


def utc(text: str) -> str:
    return format_utc(at(text).astimezone(UTC))
