"""An incident opened while another branch's action is still executing: the run stays
suspended, and a cancel asked for then waits for that action."""

from __future__ import annotations

from flask import Flask

from app.context import clock, database
from app.runs import engine


def incident_beside_an_in_flight_action(
    app: Flask, failing_step: str, other_step: str
) -> engine.Claim:
    """Claim the run's first steps as one worker: `other_step` stays executing, `failing_step`
    fails into an incident. Returns the claim still in flight, for `finish_in_flight`."""
    settings = engine.WorkerSettings(name="w", queue=engine.ANY_QUEUE)
    db, clk = database(app), clock(app)
    assert engine.claim_next(db, clk, settings) is True
    in_flight = engine.claim_next(db, clk, settings)
    failing = engine.claim_next(db, clk, settings)
    assert isinstance(in_flight, engine.Claim) and isinstance(failing, engine.Claim)
    assert in_flight.context.step_id == other_step and failing.context.step_id == failing_step
    assert engine.commit_outcome(db, clk, failing, engine.execute(failing)) is True
    return in_flight


def finish_in_flight(app: Flask, in_flight: engine.Claim) -> None:
    """The executing action completes and records its result."""
    outcome = engine.execute(in_flight)
    assert engine.commit_outcome(database(app), clock(app), in_flight, outcome) is True
