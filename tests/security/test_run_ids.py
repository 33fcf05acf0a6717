"""Run ids beginning `schedule:` are the ticker's; a clash never stalls a schedule (finding 4)."""

from __future__ import annotations

from sqlalchemy import select

from app.context import clock, database
from app.db import Namespace, Run
from app.runs import lifecycle
from app.ticker.tick import run_tick
from tests.conftest import FIXED_NOW
from tests.security.conftest import deploy, error_of


def _tick_at(app, text: str):
    from app.calendar import parse_instant

    with database(app).session() as session:
        clock(app).set(session, parse_instant(text))
        session.commit()
    return run_tick(app).rows


def test_post_runs_with_a_schedule_prefix_is_422_and_writes_nothing(app, admin_api):
    deploy(admin_api)
    for run_id in ("schedule:s:20260105T120500Z", "schedule:x", "schedule:s:manual:1"):
        response = admin_api.post("/runs", json={"workflow": "wf", "run_id": run_id})
        assert response.status_code == 422
        error = error_of(response)
        assert error["code"] == "VALIDATION" and error["details"]["errors"][0]["loc"] == ["run_id"]
    with database(app).session() as session:
        assert session.scalar(select(Run.id)) is None
    assert (
        admin_api.post("/runs", json={"workflow": "wf", "run_id": "schedules-1"}).status_code == 201
    )


def test_fire_once_schedule_keeps_firing_past_a_taken_run_id(app, admin_api):
    deploy(admin_api)
    body = {
        "id": "s",
        "cron": "*/5 * * * *",
        "action": {"workflow": "wf"},
        "overlap_policy": "allow_all",
        "missed_policy": "fire_once",
    }
    assert admin_api.post("/schedules", json=body).status_code == 201
    # A run squatting on the next ids (as rows written before the prefix was reserved).
    with database(app).session() as session:
        namespace = session.scalar(select(Namespace).where(Namespace.name == "default"))
        target = lifecycle.resolve_target(session, namespace, workflow="wf")
        for stamp in ("20260105T120500Z", "20260105T121000Z"):
            lifecycle.start_run(session, FIXED_NOW, namespace, target, f"schedule:s:{stamp}", {})
        session.commit()
    rows = _tick_at(app, "2026-01-05T12:05:00Z")
    assert [(r["outcome"], r["next_fire_at"]) for r in rows] == [
        ("skipped", "2026-01-05T12:10:00Z")
    ]
    rows = _tick_at(app, "2026-01-05T12:10:00Z")
    assert [r["outcome"] for r in rows] == ["skipped"]
    rows = _tick_at(app, "2026-01-05T12:15:00Z")
    assert [(r["outcome"], r["run_id"]) for r in rows] == [
        ("triggered", "schedule:s:20260105T121500Z")
    ]
    ledger = admin_api.get("/schedules/s/occurrences").get_json()["items"]
    assert [(o["kind"], o["reason"]) for o in ledger] == [
        ("started", None),
        ("skipped", "run_id_taken"),
        ("skipped", "run_id_taken"),
    ]
