"""Where a simulation starts: the window and run length asked for, and the schedule's state,
either from a save body (parsed and checked as a save would, nothing written) or from the
stored schedule (its cursor, pending occurrence, buffer, remaining runs and active runs).

Only reads; the simulation itself is pure (app/schedules/simulate.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.calendar import (
    CalendarError,
    PreviewItem,
    Spec,
    check_range,
    parse_duration,
    parse_instant,
    preview,
)
from app.db import Namespace, Schedule
from app.runs import lifecycle
from app.runs.errors import ActivationNotFound, ActivationNotReady
from app.schedules import store, targets
from app.schedules.config import parse_request
from app.schedules.errors import ScheduleDeleted, invalid
from app.schedules.simulate import ActiveRun, Buffered, Start
from app.schedules.tick.policy import Occurrence, kept_due
from app.schedules.transitions import fire_at

WINDOW_KEYS = ("from", "to", "run_duration")
MAX_WINDOW = timedelta(days=366)
MAX_RUN_DURATION = timedelta(days=366)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2900, 1, 1, tzinfo=UTC)
WINDOW_RANGE = "must be from 1970-01-01T00:00:00Z to before 2900-01-01T00:00:00Z"
# Run ids of a simulated schedule saved without an id (save would generate one).
UNSAVED_ID = "new"


@dataclass(frozen=True)
class Window:
    """[begin, end) and the assumed length of every run."""

    begin: datetime
    end: datetime
    run_duration: timedelta


def parse_window(data: Mapping[str, Any]) -> Window:
    """`from`, `to` (ISO-8601 instants) and `run_duration` (default PT0S), or 422 naming one."""
    begin, end = _instant(data, "from"), _instant(data, "to")
    if end <= begin:
        raise invalid(["to"], "must be after 'from'")
    if end - begin > MAX_WINDOW:
        raise invalid(["to"], f"must be at most {MAX_WINDOW.days} days after 'from'")
    raw = data.get("run_duration")
    duration = timedelta(0)
    if raw is not None:
        try:
            duration = parse_duration(raw, ("run_duration",))
        except CalendarError as exc:
            raise invalid(["run_duration"], exc.msg) from None
        if duration > MAX_RUN_DURATION:
            raise invalid(["run_duration"], f"must be at most {MAX_RUN_DURATION.days} days")
    return Window(begin, end, duration)


def from_body(
    session: Session, now: datetime, namespace: Namespace, data: Mapping[str, Any], begin: datetime
) -> Start:
    """A schedule saved from `data` just before `begin`: the same checks as save, no write.

    A body naming an existing schedule keeps that schedule's uid (a replacement would), so the
    jitter matches; a new schedule's uid is only drawn when it is saved, so a stand-in is used.
    """
    schedule_id, config = parse_request(data)
    existing = store.find(session, namespace, schedule_id) if schedule_id else None
    if existing is not None and existing.status == "deleted":
        # A save would be refused: ids are never reused.
        raise ScheduleDeleted(existing.schedule_id)
    check_range(config.spec, now)
    targets.resolve(session, namespace, config, data)
    return Start(
        schedule_id=schedule_id or UNSAVED_ID,
        uid=existing.uid if existing is not None else _stand_in_uid(namespace, schedule_id),
        spec=config.spec,
        # Just before `from`: an occurrence at `from` itself is in the window.
        cursor=begin - timedelta(microseconds=1),
        overlap_policy=config.overlap_policy,
        missed_policy=config.missed_policy,
        jitter_seconds=config.jitter_seconds,
        remaining_runs=config.max_runs,
    )


def from_stored(session: Session, schedule: Schedule) -> Start:
    """The stored schedule as it is now; only an active schedule fires."""
    assert schedule.cursor_at is not None
    runs = [
        ActiveRun(run.run_id, run.created_at, run.lease_owner is not None)
        for run in lifecycle.active_runs_of_schedule(session, schedule.uid)
    ]
    buffer = [
        Buffered(row.instant, row.origin)
        for row in (store.buffered(session, schedule) if schedule.buffered_count else [])
    ]
    return Start(
        schedule_id=schedule.schedule_id,
        uid=schedule.uid,
        spec=store.spec_of(schedule),
        cursor=schedule.cursor_at,
        overlap_policy=schedule.overlap_policy,
        missed_policy=schedule.missed_policy,
        jitter_seconds=schedule.jitter_seconds,
        remaining_runs=schedule.remaining_runs,
        # A target that is not ready blocks the schedule at its next tick: nothing fires.
        active=schedule.status == "active" and _target_ready(session, schedule),
        pending=schedule.pending_occurrence,
        pending_until=schedule.pending_until,
        fire_at=fire_at(schedule),
        buffer=buffer,
        runs=runs,
    )


def _target_ready(session: Session, schedule: Schedule) -> bool:
    namespace = session.get(Namespace, schedule.namespace_id)
    assert namespace is not None
    action = schedule.action
    try:
        lifecycle.resolve_target(
            session,
            namespace,
            workflow=action.get("workflow"),
            activation_id=action.get("activation_id"),
        )
    except (ActivationNotFound, ActivationNotReady):
        return False
    return True


def _instant(data: Mapping[str, Any], key: str) -> datetime:
    raw = data.get(key)
    if raw is None:
        raise invalid([key], "is required (an ISO-8601 instant, like 2026-01-05T12:00:00Z)")
    try:
        # The window is [from, to): finer than a microsecond, either bound rounds up.
        value = parse_instant(raw, (key,), round_up=True)
    except CalendarError as exc:
        if exc.code != "VALIDATION":
            raise invalid([key], exc.msg) from None
        value = None  # out of any instant's range: the window's own range says more
    if value is None or not EARLIEST <= value < LATEST:
        raise invalid([key], WINDOW_RANGE)
    return value


def jitter_uid(session: Session, namespace: Namespace, schedule_id: str | None) -> str:
    """The uid whose jitter a schedule saved as `schedule_id` would have: the existing
    schedule's (a replacement keeps it), else the stand-in `from_body` uses."""
    existing = store.find(session, namespace, schedule_id) if schedule_id else None
    return existing.uid if existing is not None else _stand_in_uid(namespace, schedule_id)


@dataclass(frozen=True)
class PreviewStart:
    """Where a preview starts (`after`), the uid its jitter is drawn from, and the jitter of
    the schedule it previews (None for one not saved yet)."""

    after: datetime
    uid: str
    jitter_seconds: int | None
    # The occurrence the tick is to fire next and when, for a save that keeps the cursor.
    fire_at: Occurrence | None = None

    def due_times(
        self, spec: Spec, count: int, jitter_seconds: int, now: datetime
    ) -> list[PreviewItem]:
        """The `count` due times the schedule fires once saved now with `jitter_seconds`: the
        next occurrence is due no earlier than the save would keep it (`keep_due`)."""
        items = preview(spec, self.after, count, uid=self.uid, jitter_seconds=jitter_seconds)
        first = items[0] if items else None
        if first is not None and self.fire_at and first.canonical == self.fire_at.instant:
            items[0] = first.moved(kept_due(first.at, self.fire_at.due, now), spec.zone)
        return items


def preview_start(
    session: Session, namespace: Namespace, schedule_id: str | None, spec: Spec, now: datetime
) -> PreviewStart:
    """Where a preview of `spec`, for the schedule saved as `schedule_id`, starts: what the
    schedule fires once saved now. A new calendar (a new schedule, or one whose calendar fires
    differently) starts after now; one that fires alike (respelled, or untouched) keeps an
    active schedule's cursor, so what is due but not yet ticked comes first, as in its
    forecast. A paused or blocked schedule starts again from its cursor or now, the later (as
    resuming it does), so a clock moved back shows nothing it already fired."""
    existing = store.find(session, namespace, schedule_id) if schedule_id else None
    if existing is None:
        return PreviewStart(now, _stand_in_uid(namespace, schedule_id), None)
    after, kept = now, None
    if existing.cursor_at is not None:
        keeps = existing.status == "active" and Spec.from_dict(existing.spec).fires_like(spec)
        after = existing.cursor_at if keeps else max(existing.cursor_at, now)
        kept = fire_at(existing) if keeps else None
    return PreviewStart(after, existing.uid, existing.jitter_seconds, kept)


def _stand_in_uid(namespace: Namespace, schedule_id: str | None) -> str:
    digest = hashlib.blake2b(f"{namespace.name}|{schedule_id or ''}".encode(), digest_size=16)
    return f"simulated-{digest.hexdigest()}"
