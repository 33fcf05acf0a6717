"""`flask demo seed` fills an empty database through the real services and ticker (both DBs)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.cli import demo_data
from app.context import database
from app.db import Run, RunBranch, RunIncident, Schedule, ScheduleOccurrence, Task
from tests.console.test_pages import sign_in


def test_seed_builds_a_living_namespace(app, runner, client, monkeypatch):
    from app.context import database
    from app.db import rls

    # As from a shell: the command's own session has no namespace scope (the fixtures give
    # tests every namespace), so on PostgreSQL it must bind one to write the demo's rows.
    monkeypatch.setattr(database(app), "scope", rls.NOTHING)
    result = runner.invoke(args=["demo", "seed", "--hours", "8"])
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert "Sign in as 'demo' with password 'demo-password'." in result.output
    with database(app).session() as session:
        schedules = {s.schedule_id: s for s in session.scalars(select(Schedule))}
        assert len(schedules) == len(demo_data.SCHEDULES) + 1 >= 20
        zones = {s.spec.get("timezone") for s in schedules.values()}
        assert {"Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney"} <= zones
        overlap = {s.overlap_policy for s in schedules.values()}
        assert overlap == {
            "skip",
            "buffer_one",
            "buffer_all",
            "allow_all",
            "cancel_other",
            "terminate_other",
        }
        assert {s.missed_policy for s in schedules.values()} == {"skip", "fire_once"}
        assert schedules[demo_data.PINNED_ID].status == "blocked"
        assert schedules[demo_data.PAUSED_ID].status == "paused"
        kinds = dict(
            session.execute(
                select(ScheduleOccurrence.reason, func.count()).group_by(ScheduleOccurrence.reason)
            ).all()
        )
        assert kinds.get("overlap_policy_skip") and kinds.get("missed")
        buffered = select(func.count()).where(ScheduleOccurrence.kind == "buffered")
        assert session.scalar(buffered.select_from(ScheduleOccurrence))
        statuses = set(session.scalars(select(Run.status).distinct()))
        assert {"completed", "failed", "waiting"} <= statuses
        tasks = dict(session.execute(select(Task.status, func.count()).group_by(Task.status)).all())
        # Tasks open at a quarter of the replay were approved; a later one waits in the inbox.
        assert tasks["completed"] >= 1 and tasks["open"] >= 1
        # An incident skipped by an operator (with its report) and a later one still open.
        opened = list(session.scalars(select(RunIncident).order_by(RunIncident.opened_at)))
        assert [i.resolution for i in opened] == ["skip", None]
        assert opened[0].report == {"held_continuations": 0, "elapsed_waits": 0, "timeouts": 0}
        suspended = session.get(Run, opened[1].run_pk)
        assert suspended is not None and suspended.status == "suspended"
        # Runs with parallel branches, all three regions of each started and completed.
        branches = list(session.scalars(select(RunBranch)))
        assert len(branches) == 6 and all(b.completed_at for b in branches)
    # The printed login works and the overview shows the namespace alive.
    assert sign_in(client, "demo", "demo-password").status_code == 302
    page = client.get("/ns/acme/").get_data(as_text=True)
    assert 'data-count="blocked">1<' in page
    assert f'data-count="tasks">{tasks["open"]}<' in page
    assert 'data-count="incidents">1<' in page
    listed = client.get("/ns/acme/incidents").get_data(as_text=True)
    assert "payment gateway: batch declined" in listed and "Retry</button>" in listed
    sync = session_run_ids(app, "region-sync")[0]
    detail = client.get(f"/ns/acme/runs/{sync}").get_data(as_text=True)
    assert detail.count('class="step-bar step-completed"') == 3 + 3 * 3
    again = runner.invoke(args=["demo", "seed"])
    assert again.exit_code != 0 and "use a fresh file" in again.output


def session_run_ids(app, workflow_prefix: str) -> list[str]:
    with database(app).session() as session:
        query = select(Run.run_id).where(Run.run_id.like(f"{workflow_prefix}-%")).order_by(Run.id)
        return list(session.scalars(query))
