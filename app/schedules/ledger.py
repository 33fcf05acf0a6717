"""The rows a schedule's decisions write: ledger occurrences and audit events, in bulk.

`Writes` collects the rows of one transaction and inserts them together when its work is done,
so the tick writes a whole page of firings with a handful of statements (Core on the hot path).
`record_skip` and `record_buffer` are the two ledger entries that start no run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from app.calendar import format_utc
from app.db import Schedule, ScheduleHistoryEvent, ScheduleOccurrence, ScheduleRevision
from app.db.bulk import Statement, insert_each, insert_each_statements
from app.schedules.audit import CommandContext, event_row
from app.schedules.tick.policy import Skip

OCCURRENCES = cast(Table, ScheduleOccurrence.__table__)
EVENTS = cast(Table, ScheduleHistoryEvent.__table__)
REVISIONS = cast(Table, ScheduleRevision.__table__)


@dataclass
class Writes:
    """Ledger, audit and revision rows of one transaction, inserted together by `flush`."""

    occurrences: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)

    def event(
        self,
        schedule: Schedule,
        now: datetime,
        event_type: str,
        payload: dict[str, Any],
        run_id: str | None = None,
        run_uid: str | None = None,
    ) -> None:
        """Queue the schedule's next audit event; the caller holds the schedule's row lock."""
        schedule.history_sequence += 1
        self.events.append(
            event_row(
                schedule.id, schedule.history_sequence, now, event_type, payload, run_id, run_uid
            )
        )

    def occurrence(
        self,
        schedule: Schedule,
        now: datetime,
        *,
        origin: str,
        kind: str,
        instant: datetime,
        through: datetime | None = None,
        count: int = 1,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self.occurrences.append(
            {
                "schedule_pk": schedule.id,
                "origin": origin,
                "kind": kind,
                "instant": instant,
                "through": through,
                "count": count,
                "reason": reason,
                "run_id": run_id,
                "revision": schedule.revision,
                "observed_at": now,
            }
        )

    def flush(self, session: Session) -> None:
        """Flush the session's changes, then insert the queued rows (one statement on
        PostgreSQL, one per table on SQLite)."""
        session.flush()
        insert_each(session.connection(), self._batches())
        self.occurrences, self.events, self.revisions = [], [], []

    def prepare(self, dialect: Dialect) -> list[Statement]:
        """PostgreSQL: the statements that insert the queued rows, built now so another
        thread only has to send them (after flushing the session)."""
        statements = insert_each_statements(dialect, self._batches())
        self.occurrences, self.events, self.revisions = [], [], []
        return statements

    def _batches(self) -> list[tuple[Table, list[dict[str, Any]]]]:
        return [
            (OCCURRENCES, self.occurrences),
            (EVENTS, self.events),
            (REVISIONS, self.revisions),
        ]


def record_skip(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    skip: Skip,
    context: CommandContext,
    origin: str = "scheduled",
) -> None:
    """A skipped range: one ledger row, the skip counters, one `ScheduleTriggerSkipped`."""
    w.occurrence(
        schedule,
        now,
        origin=origin,
        kind="skipped",
        instant=skip.first,
        through=skip.last,
        count=skip.count,
        reason=skip.reason,
    )
    count_skipped(w, schedule, now, skip.count, skip.reason, context)


def count_skipped(
    w: Writes,
    schedule: Schedule,
    now: datetime,
    count: int,
    reason: str,
    context: CommandContext,
) -> None:
    """Add `count` to the skip counters and queue the `ScheduleTriggerSkipped` event."""
    schedule.skipped_trigger_count += count
    schedule.last_skip_reason, schedule.last_skipped_at = reason, now
    audit_skip(w, schedule, now, reason, context)


def audit_skip(
    w: Writes, schedule: Schedule, now: datetime, reason: str, context: CommandContext
) -> None:
    """A backfill skip: audited and reported, but no ledger row and no counter, so a retried
    backfill can still start the occurrence and the counters count occurrences, not attempts."""
    w.event(
        schedule,
        now,
        "ScheduleTriggerSkipped",
        {
            "reason": reason,
            "skipped_trigger_count": schedule.skipped_trigger_count,
            "last_skipped_at": format_utc(now),
            "command_context": context.to_json(),
        },
    )


def record_buffer(
    w: Writes, schedule: Schedule, now: datetime, instant: datetime, origin: str = "scheduled"
) -> None:
    """An occurrence waiting in the schedule's buffer until no run of it is active."""
    w.occurrence(schedule, now, origin=origin, kind="buffered", instant=instant)
    schedule.buffered_count += 1
