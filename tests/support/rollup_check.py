"""The runs rollup agrees with counting the runs, checked after every runs scenario."""

from __future__ import annotations

from collections import Counter

from flask import Flask
from sqlalchemy import func, select

from app.context import database
from app.db import Run, RunRollup
from app.db.rollup import hour_of, state_of


def assert_rollup_agrees(app: Flask) -> None:
    """Runs per (namespace, hour, state) from the rollup are the runs counted directly."""
    with database(app).session() as session:
        direct: Counter[tuple[int, object, str]] = Counter()
        rows = session.execute(select(Run.namespace_id, Run.created_at, Run.status))
        for namespace_id, created_at, status in rows:
            direct[(namespace_id, hour_of(created_at), state_of(status))] += 1
        sums = session.execute(
            select(
                RunRollup.namespace_id, RunRollup.hour, RunRollup.state, func.sum(RunRollup.runs)
            ).group_by(RunRollup.namespace_id, RunRollup.hour, RunRollup.state)
        )
        rolled = Counter({(ns, hour, state): int(n) for ns, hour, state, n in sums if n})
    assert rolled == direct, "the runs rollup disagrees with the runs"
