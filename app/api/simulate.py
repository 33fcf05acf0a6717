"""Simulation routes: what a schedule would do over [from, to), computed and never done.

Both answer the same shape (`SimulationOut`) and need only `run.read`. Nothing is written: the
request's session only reads and is never committed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Blueprint, current_app, jsonify

from app import context
from app.api import errors
from app.api.routing import operation, parse_body
from app.api.simulate_models import SimulateScheduleIn, SimulationOut, WindowIn
from app.auth.grants import RUN_READ
from app.db import Namespace
from app.schedules import simulate_start, store
from app.schedules.simulate import Start, simulate

bp = Blueprint("api_simulate", __name__)
errors.register(bp)


@operation(
    bp,
    "POST",
    "/schedules/simulate",
    summary="Simulate a schedule from a save body over [from, to), writing nothing",
    grant=RUN_READ,
    body=SimulateScheduleIn,
    namespaced=True,
    response=SimulationOut,
)
def simulate_body(namespace: Namespace) -> Any:
    """What the schedule `body` describes would do if saved just before `from`."""
    data = parse_body(SimulateScheduleIn).model_dump(exclude_unset=True, by_alias=True)
    window = simulate_start.parse_window(data)
    save = {k: v for k, v in data.items() if k not in simulate_start.WINDOW_KEYS}
    start = simulate_start.from_body(
        context.session(), context.now(), namespace, save, window.begin
    )
    return _answer(start, window)


@operation(
    bp,
    "POST",
    "/schedules/<schedule_id>/simulate",
    summary="Simulate a stored schedule over [from, to), writing nothing",
    grant=RUN_READ,
    body=WindowIn,
    namespaced=True,
    response=SimulationOut,
)
def simulate_stored(namespace: Namespace, schedule_id: str) -> Any:
    """What the stored schedule, as it is now, would do over the window."""
    data = parse_body(WindowIn).model_dump(exclude_unset=True, by_alias=True)
    window = simulate_start.parse_window(data)
    schedule = store.get(context.session(), namespace, schedule_id)
    return _answer(simulate_start.from_stored(context.session(), schedule), window)


def _answer(start: Start, window: simulate_start.Window) -> Any:
    grace = timedelta(seconds=float(current_app.config["MISFIRE_GRACE_SECONDS"]))
    period = timedelta(seconds=float(current_app.config["TICK_SECONDS"]))
    # Reads only: end the read transaction without committing anything.
    context.session().rollback()
    result = simulate(start, (window.begin, window.end), window.run_duration, grace, period)
    return jsonify(result.to_json())
