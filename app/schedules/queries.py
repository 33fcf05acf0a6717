"""Reading schedules: the resource, lists, upcoming fires, the ledger and audit stream pages, and
the namespace's run starts over the next day."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from sqlalchemy import Select, String, func, literal, or_, select
from sqlalchemy.orm import Session

from app.calendar import (
    PreviewItem,
    Spec,
    due_time,
    format_utc,
    format_utc_or_none,
    occurrences_between,
    preview,
)
from app.db import (
    ACTIVE_RUN_STATUSES,
    SCHEDULE_STATUSES,
    Namespace,
    Run,
    Schedule,
    ScheduleHistoryEvent,
    ScheduleOccurrence,
    User,
)
from app.errors import InvalidCursor
from app.inputs import ascii_int
from app.paging import keyset, split_page
from app.schedules import sealed
from app.schedules.errors import invalid
from app.schedules.transitions import fire_at

MAX_HISTORY_LIMIT = 500
MAX_UPCOMING = 100
# A schedule firing every second would add 86,400 points a day; the load chart needs no more.
MAX_STARTS_PER_SCHEDULE = 2000


@dataclass(frozen=True)
class ScheduleFilter:
    """The list filters: status, `label=k:v` (all must match), text, deleted ones."""

    status: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    text: str | None = None
    include_deleted: bool = False


def resources(
    session: Session,
    namespace: Namespace,
    schedules: Sequence[Schedule],
    upcoming: int | None = None,
    known_users: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """The resource of each schedule, with its principal and running runs.

    `known_users` (id -> name, e.g. the acting user) spares looking those principals up.
    """
    running: defaultdict[str, list[str]] = defaultdict(list)
    uids = [s.uid for s in schedules]
    if uids:
        rows = session.execute(
            select(Run.schedule_uid, Run.run_id)
            .where(Run.schedule_uid.in_(uids), Run.status.in_(ACTIVE_RUN_STATUSES))
            .order_by(Run.id)
        )
        for uid, run_id in rows:
            running[uid].append(run_id)
    names = dict(known_users or {})
    principal_ids = {s.principal_id for s in schedules} - set(names)
    if principal_ids:
        query = select(User.id, User.username).where(User.id.in_(principal_ids))
        names |= {user_id: username for user_id, username in session.execute(query)}
    return [
        _resource(s, namespace, names.get(s.principal_id), running[s.uid], upcoming)
        for s in schedules
    ]


def created_resource(namespace: Namespace, schedule: Schedule, principal: str) -> dict[str, Any]:
    """The resource of a schedule just created: no run of it exists yet, its creator is its
    principal, so nothing needs reading."""
    return _resource(schedule, namespace, principal, [], None)


def _resource(
    schedule: Schedule,
    namespace: Namespace,
    principal: str | None,
    running: list[str],
    upcoming: int | None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schedule_id": schedule.schedule_id,
        "uid": schedule.uid,
        "namespace": namespace.name,
        "revision": schedule.revision,
        "status": schedule.status,
        "blocked_reason": schedule.blocked_reason,
        "paused_reason": schedule.paused_reason,
        "principal": principal,
        "spec": schedule.spec,
        "action": schedule.action,
        "overlap_policy": schedule.overlap_policy,
        "missed_policy": schedule.missed_policy,
        "jitter_seconds": schedule.jitter_seconds,
        "max_runs": schedule.max_runs,
        "labels": schedule.labels,
        "memo": schedule.memo,
        "search_attributes": schedule.search_attributes,
        "notes": schedule.notes,
        "next_fire_at": format_utc_or_none(schedule.next_fire_at),
        "last_fired_at": format_utc_or_none(schedule.last_fired_at),
        "fires_count": schedule.fires_count,
        "remaining_runs": schedule.remaining_runs,
        "skipped_trigger_count": schedule.skipped_trigger_count,
        "last_skip_reason": schedule.last_skip_reason,
        "last_skipped_at": format_utc_or_none(schedule.last_skipped_at),
        "buffered_count": schedule.buffered_count,
        "latest_run_id": schedule.latest_run_id,
        "running_run_ids": running,
        "created_at": format_utc_or_none(schedule.created_at),
        "updated_at": format_utc_or_none(schedule.updated_at),
        "deleted_at": format_utc_or_none(schedule.deleted_at),
    }
    if upcoming is not None:
        data["upcoming"] = upcoming_of(schedule, upcoming)
    return data


def upcoming_of(schedule: Schedule, count: int) -> list[dict[str, Any]]:
    """The next `count` due times of an active schedule, as the API shows them."""
    return [item.to_dict() for item in upcoming_items(schedule, count)]


def upcoming_items(schedule: Schedule, count: int) -> list[PreviewItem]:
    """The next `count` occurrences of an active schedule (none while it cannot fire)."""
    count = starts_left(schedule.remaining_runs, count)
    if schedule.status != "active" or schedule.cursor_at is None or count == 0:
        return []
    spec = Spec.from_dict(schedule.spec)
    cursor = schedule.cursor_at
    # An occurrence at or before the cursor is already accounted for, whatever its jitter.
    items = preview(
        spec,
        cursor,
        min(count + 1, MAX_UPCOMING),
        uid=schedule.uid,
        jitter_seconds=schedule.jitter_seconds,
    )
    items = [item for item in items if item.canonical > cursor][:count]
    # The next one is due when `next_fire_at` says: a change may have held it (`keep_due`).
    kept = fire_at(schedule)
    if items and kept is not None and items[0].canonical == kept.instant and kept.due > items[0].at:
        items[0] = items[0].moved(kept.due, spec.zone)
    return items


def starts_left(remaining_runs: int | None, count: int) -> int:
    """At most `count` forecast starts, and never more than the runs `max_runs` leaves."""
    return count if remaining_runs is None else max(0, min(count, remaining_runs))


def upcoming_starts(
    session: Session, namespace: Namespace, now: datetime, hours: int = 24
) -> list[datetime]:
    """Jittered due times of every active schedule of the namespace in the next `hours`."""
    until = now + timedelta(hours=hours)
    rows = session.execute(
        select(
            Schedule.uid,
            Schedule.spec,
            Schedule.jitter_seconds,
            Schedule.cursor_at,
            Schedule.remaining_runs,
        ).where(Schedule.namespace_id == namespace.id, Schedule.status == "active")
    )
    starts: list[datetime] = []
    for uid, raw_spec, jitter, cursor, remaining in rows:
        spec = Spec.from_dict(raw_spec)
        after = max(now, cursor) if cursor else now
        limit = starts_left(remaining, MAX_STARTS_PER_SCHEDULE)
        for instant in islice(occurrences_between(spec, after, until), limit):
            starts.append(due_time(spec, uid, jitter, instant))
    return starts


def list_schedules(
    session: Session,
    namespace: Namespace,
    filters: ScheduleFilter,
    limit: int,
    after_pk: int | None,
) -> tuple[list[Schedule], int | None]:
    """A page of schedules, newest first, and the key of the next page (or None)."""
    query = select(Schedule).where(Schedule.namespace_id == namespace.id)
    query = _filtered(query, filters)
    position = [after_pk] if after_pk is not None else None
    query = keyset(query, [Schedule.id], position, limit, descending=True)
    rows, key = split_page(list(session.scalars(query)), limit, lambda row: [row.id])
    return rows, (key[0] if key else None)


def _fold(text: Any) -> Any:
    """`text` in lower case, a final sigma as any sigma: what `q` compares, on both sides.

    PostgreSQL lowers ΣΊΣΥΦΟΣ to σίσυφοσ and Python (SQLite's `lower`, app/db/session.py) to
    σίσυφος, so a word typed in lower case was found on one database and not the other; with
    ς read as σ both agree. (SQLite's `lower` also maps a dotted capital I to i, as
    PostgreSQL does.)
    """
    return func.translate(func.lower(text), "ς", "σ")


def _filtered(query: Select[tuple[Schedule]], filters: ScheduleFilter) -> Select[tuple[Schedule]]:
    if filters.status is not None:
        if filters.status not in SCHEDULE_STATUSES:
            raise invalid(["query", "status"], f"must be one of {', '.join(SCHEDULE_STATUSES)}")
        query = query.where(Schedule.status == filters.status)
    elif not filters.include_deleted:
        query = query.where(Schedule.status != "deleted")
    for key, value in filters.labels:
        query = query.where(Schedule.labels[key].as_string() == value)
    if filters.text:
        # Both sides folded by the database the same way (`_fold`).
        escaped = re.sub(r"([/%_])", r"/\1", filters.text)
        needle = _fold(literal("%", String) + escaped + "%")
        query = query.where(
            or_(
                *(
                    _fold(column).like(needle, escape="/")
                    for column in (Schedule.schedule_id, Schedule.notes, Schedule.workflow_name)
                )
            )
        )
    return query


def occurrences(
    session: Session,
    schedule: Schedule,
    limit: int,
    after: tuple[datetime, int] | None,
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """A page of the ledger, newest first, and the keyset of the next page (or None)."""
    query = select(ScheduleOccurrence).where(ScheduleOccurrence.schedule_pk == schedule.id)
    columns = [ScheduleOccurrence.instant, ScheduleOccurrence.id]
    query = keyset(query, columns, after, limit, descending=True)
    rows, key = split_page(
        list(session.scalars(query)), limit, lambda row: [format_utc(row.instant), row.id]
    )
    items = [
        {
            "kind": row.kind,
            "instant": format_utc(row.instant),
            "through": format_utc_or_none(row.through),
            "count": row.count,
            "reason": row.reason,
            "run_id": row.run_id,
            "origin": row.origin,
            "revision": row.revision,
            "observed_at": format_utc(row.observed_at),
        }
        for row in rows
    ]
    return items, key


def history(
    session: Session, namespace: Namespace, schedule: Schedule, limit: int, after_sequence: int
) -> dict[str, Any]:
    """One page of the audit stream, in its documented shape; schedule inputs are masked where
    any version of their workflow marks a secret (once secret, stays secret)."""
    event = ScheduleHistoryEvent
    # Plain rows, not ORM objects: clients walk long streams 500 events at a time, and building
    # entities dominated the time of a page.
    query = select(
        event.id,
        event.sequence,
        event.event_type,
        event.payload,
        event.workflow_instance_id,
        event.workflow_run_id,
        event.recorded_at,
    ).where(event.schedule_pk == schedule.id)
    query = keyset(query, [event.sequence], [after_sequence], limit, descending=False)
    rows, key = split_page(list(session.execute(query)), limit, lambda row: [row.sequence])
    schemas = sealed.input_schemas(
        session, namespace, schedule.workflow_name, [row.payload for row in rows]
    )
    return {
        "schedule_id": schedule.schedule_id,
        "namespace": namespace.name,
        "events": [
            {
                "id": row.id,
                "sequence": row.sequence,
                "event_type": row.event_type,
                "payload": sealed.masked_payload(row.payload, schemas),
                "workflow_instance_id": row.workflow_instance_id,
                "workflow_run_id": row.workflow_run_id,
                "recorded_at": format_utc(row.recorded_at),
            }
            for row in rows
        ],
        "next_cursor": key[0] if key else None,
        "has_more": key is not None,
    }


MAX_SEQUENCE = 2**31 - 1


def parse_after_sequence(raw: str | None) -> int:
    """`after_sequence`: a non-negative integer, else 400 INVALID_CURSOR."""
    if raw is None or raw == "":
        return 0
    value = ascii_int(raw)
    if value is None:
        msg = "must be a non-negative integer"
        errors = [{"loc": ["query", "after_sequence"], "msg": msg}]
        raise InvalidCursor(f"after_sequence {msg}", errors=errors)
    # A sequence is a 32-bit column on PostgreSQL: past the largest one, every page is empty.
    return min(value, MAX_SEQUENCE)
