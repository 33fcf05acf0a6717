"""The audit payload registry and the bulk run starter's fidelity to lifecycle.start_run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text

from app.db import Deadline, Namespace, Run, RunHistoryEvent, Schedule
from app.db.bulk import execute
from app.runs import lifecycle
from app.schedules.audit import (
    EVENT_KEYS,
    AuditPayloadError,
    CommandContext,
    check_payload,
    event_row,
)
from app.schedules.tick.starts import BulkStarter, RunStart, orm_starter
from tests.conftest import FIXED_NOW


def test_the_registry_has_exactly_the_spec_events():
    assert set(EVENT_KEYS) == {
        "ScheduleCreated",
        "SchedulePaused",
        "ScheduleResumed",
        "ScheduleUpdated",
        "ScheduleTriggered",
        "ScheduleTriggerSkipped",
        "ScheduleBlocked",
        "ScheduleDeleted",
    }
    assert EVENT_KEYS["ScheduleTriggered"] == {
        "workflow_instance_id",
        "workflow_run_id",
        "outcome",
        "effective_overlap_policy",
        "trigger_number",
        "occurrence_time",
        "command_context",
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"reason": "x", "paused_at": "t"},
        {"reason": "x", "paused_at": "t", "command_context": {}, "extra": 1},
    ],
)
def test_a_payload_with_a_missing_or_unknown_key_is_refused(payload):
    with pytest.raises(AuditPayloadError):
        check_payload("SchedulePaused", payload)
    with pytest.raises(AuditPayloadError):
        event_row(1, 1, FIXED_NOW, "SchedulePaused", payload)


def test_unknown_event_types_and_sources_are_refused():
    with pytest.raises(AuditPayloadError):
        check_payload("ScheduleExploded", {})
    with pytest.raises(AuditPayloadError):
        CommandContext("olga", "email")
    assert CommandContext("olga", "console").to_json() == {
        "actor": "olga",
        "source": "console",
        "request_id": None,
        "reason": None,
    }


def _columns(session, run_id):
    run = session.scalar(select(Run).where(Run.run_id == run_id))
    skip = {"id", "uid", "run_id"}
    row = {c.name: getattr(run, c.name) for c in Run.__table__.columns if c.name not in skip}
    events = [
        (e.sequence, e.event_type, e.node_id, e.payload, e.recorded_at)
        for e in session.scalars(
            select(RunHistoryEvent)
            .where(RunHistoryEvent.run_pk == run.id)
            .order_by(RunHistoryEvent.sequence)
        )
    ]
    deadlines = [
        (d.kind, d.node_id, d.due_at, d.created_at, d.consumed_at)
        for d in session.scalars(select(Deadline).where(Deadline.run_pk == run.id))
    ]
    raw = session.execute(
        text("SELECT created_at, claimable_at FROM runs WHERE run_id = :r"), {"r": run_id}
    ).one()
    return row, events, deadlines, tuple(str(value) for value in raw)


def test_the_bulk_starter_writes_what_lifecycle_start_run_writes(h):
    activation = h.workflow(timeout_seconds=600)
    h.create(
        "s",
        activation_id=activation,
        labels={"a": "b"},
        memo={"m": [1]},
        search_attributes={"k": "v"},
    )
    h.api.request(
        "PATCH",
        "/schedules/s",
        headers={"If-Match": "1"},
        json={"action": {"run_timeout_seconds": 30, "queue": "q"}, "input": {"x": 1}},
    )
    now = datetime(2026, 1, 5, 12, 5, 0, 123456, tzinfo=UTC)
    with h.db.session() as session:
        schedule = session.scalar(select(Schedule))
        namespace = session.get(Namespace, schedule.namespace_id)
        target = lifecycle.resolve_target(session, namespace, activation_id=activation)
        origin = {
            "schedule_id": "s",
            "schedule_uid": schedule.uid,
            "cron_expression": None,
            "timezone": "UTC",
            "overlap_policy": "skip",
            "trigger_number": 1,
            "occurrence_time": "2026-01-05T12:05:00Z",
        }
        bulk = BulkStarter(now)
        bulk(RunStart("bulk", target, {"x": 1}, origin, 30, schedule))
        bulk.flush(session)
        orm_starter(session, now, namespace)(
            RunStart("orm", target, {"x": 1}, origin, 30, schedule)
        )
        compared = ["bulk"]
        if not h.db.is_sqlite:
            # The tick's PostgreSQL path: ids drawn first, statements built, then sent.
            bulk(RunStart("prepared", target, {"x": 1}, origin, 30, schedule))
            bulk(RunStart("prepared-2", target, {"x": 1}, origin, 30, schedule))
            statements = bulk.prepare(session)
            assert bulk.pending == [] and len(statements) == 4  # runs, 2 events, deadline
            execute(session.connection(), statements)
            compared += ["prepared", "prepared-2"]
        session.commit()
        for run_id in compared:
            assert _columns(session, run_id) == _columns(session, "orm"), run_id
        events = _columns(session, "bulk")[1]
        assert [e[1] for e in events] == ["ScheduleTriggered", "run_started"]
        if not h.db.is_sqlite:
            # Ids come from the runs' own sequence, in the order the starts were made.
            ids = session.scalars(
                select(Run.id).where(Run.run_id.in_(compared[1:])).order_by(Run.run_id)
            ).all()
            assert ids[0] < ids[1]
            # Drawing them advanced that sequence: a run inserted afterwards comes after them.
            later = orm_starter(session, now, namespace)
            later(RunStart("orm-2", target, {"x": 1}, origin, 30, schedule))
            session.commit()
            after = session.scalar(select(Run.id).where(Run.run_id == "orm-2"))
            assert after > max(ids)
