"""Errors raised by the schedules service; `code` maps to HTTP in app/errors.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.errors import AlmanacError, Conflict, NotFound, ValidationFailed


class ScheduleNotFound(NotFound):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} does not exist", schedule_id=schedule_id)


class RevisionConflict(AlmanacError):
    """A missing or stale `If-Match`, or `If-Match` on a schedule that does not exist."""

    code = "SCHEDULE_REVISION"

    def __init__(self, message: str, current_revision: int | None) -> None:
        super().__init__(message, current_revision=current_revision)


class ScheduleDeleted(AlmanacError):
    code = "SCHEDULE_DELETED"

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"schedule {schedule_id!r} is deleted; its id is never reused",
            schedule_id=schedule_id,
        )


class ScheduleStateConflict(Conflict):
    """An operation the schedule's current state does not allow (e.g. resume a blocked target)."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message, **details)


class BackfillTooLarge(AlmanacError):
    code = "BACKFILL_TOO_LARGE"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"the range holds more than {limit} occurrences; split it", limit=limit, count=count
        )


def invalid(loc: Sequence[str | int], msg: str) -> ValidationFailed:
    """A 422 VALIDATION error naming one field."""
    return ValidationFailed([{"loc": list(loc), "msg": msg}])
