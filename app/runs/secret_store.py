"""Re-encrypting every stored secret with the first key (`flask --app wsgi secrets rotate`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text, cast, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.db import Run, RunHistoryEvent, Schedule, ScheduleHistoryEvent, ScheduleRevision
from app.db.session import begin_write
from app.runs import secrets

# Every JSON column a sealed secret can be copied into.
SEALED_COLUMNS: tuple[InstrumentedAttribute[Any], ...] = (
    Run.input,
    RunHistoryEvent.payload,
    Schedule.action,
    ScheduleRevision.config,
    ScheduleHistoryEvent.payload,
)
BATCH = 500


def rotate_all(session: Session, unopened: list[str]) -> int:
    """Re-encrypt every sealed value with the first configured key; returns the rows rewritten
    (those holding at least one value a configured key opens).
    Values no configured key opens are left as they are and listed in `unopened`."""
    changed = 0
    for column in SEALED_COLUMNS:
        changed += _rotate_column(session, column, unopened)
    return changed


def _rotate_column(
    session: Session, column: InstrumentedAttribute[Any], unopened: list[str]
) -> int:
    model = column.class_
    changed, after = 0, 0
    while True:
        # Read and write in one write transaction, the rows locked: a save committed between
        # the read and the write would otherwise be overwritten by the stale value re-encrypted.
        begin_write(session)
        rows = session.execute(
            select(model.id, column)
            .where(model.id > after, cast(column, Text).like(f"%{secrets.PREFIX}%"))
            .order_by(model.id)
            .limit(BATCH)
            .with_for_update()
        ).all()
        if not rows:
            session.commit()
            return changed
        for pk, value in rows:
            rotated = secrets.rotate(value, unopened)
            # Re-sealing always yields new text; a row whose every value no key opens is the
            # same and is neither written nor counted as re-encrypted.
            if rotated != value:
                session.execute(update(model).where(model.id == pk).values({column.key: rotated}))
                changed += 1
        session.commit()
        after = rows[-1][0]
