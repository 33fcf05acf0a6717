"""Run scenarios, a pytest plugin (see tests/conftest.py): deploy and activate, move the manual
clock, tick, and check that every run replays to its stored state."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from flask import Flask

from app.context import clock, database
from app.runs.locking import begin_write
from app.runs.replay import disagreements
from app.ticker.tick import run_tick
from app.ticker.types import TickResult
from tests.conftest import Api


def assert_replay_agrees(app: Flask) -> None:
    """Replay every run in the database; each must agree with its stored state."""
    with database(app).session() as session:
        assert disagreements(session) == []


@pytest.fixture
def replay_every_run(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each scenario, every run it created replays to its stored state (docs/runs.md)."""
    # Asking for `app` here (not after the test) keeps it alive until this check has run.
    app = request.getfixturevalue("app") if "app" in request.fixturenames else None
    yield
    if app is not None:
        assert_replay_agrees(app)


class Scenario:
    """One namespace's workflows, runs and the manual clock, driven through the API."""

    def __init__(self, app: Flask, api: Api) -> None:
        self.app = app
        self.api = api

    def deploy(self, name: str, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        response = self.api.post("/workflows", json={"name": name, "steps": steps, **extra})
        assert response.status_code == 201, response.get_json()
        activation = self.api.post("/activations", json={"workflow": name})
        assert activation.status_code == 201, activation.get_json()
        return activation.get_json()

    def start(self, workflow: str, expect: int = 201, **body: Any) -> dict[str, Any]:
        response = self.api.post("/runs", json={"workflow": workflow, **body})
        assert response.status_code == expect, response.get_json()
        return response.get_json()

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.api.get(f"/runs/{run_id}")
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def events(self, run_id: str) -> list[dict[str, Any]]:
        response = self.api.get(f"/runs/{run_id}/history?limit=100")
        assert response.status_code == 200
        return response.get_json()["items"]

    def types(self, run_id: str) -> list[str]:
        return [event["event_type"] for event in self.events(run_id)]

    def signal(self, run_id: str, name: str, payload: Any = None) -> Any:
        return self.api.post(f"/runs/{run_id}/signals/{name}", json={"payload": payload})

    def now(self) -> datetime:
        with database(self.app).session() as session:
            return clock(self.app).now(session)

    def set_clock(self, instant: datetime) -> None:
        with database(self.app).session() as session:
            # Take SQLite's write lock first: a worker process may be writing meanwhile.
            begin_write(session)
            clock(self.app).set(session, instant)  # type: ignore[union-attr]
            session.commit()

    def advance(self, **delta: float) -> datetime:
        instant = self.now() + timedelta(**delta)
        self.set_clock(instant)
        return instant

    def tick(self, work: bool = True) -> TickResult:
        return run_tick(self.app, work=work)


@pytest.fixture
def scenario(app: Flask, admin_api: Api) -> Scenario:
    return Scenario(app, admin_api)
