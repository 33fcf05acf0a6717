"""Pause, resume, trigger, delete and backfill from the console (POST + CSRF, grants checked).

Refusals are answered by the blueprint's error handler (app/console/errors.py): back to the
schedule's page with the reason, or the reason in place for trigger and backfill.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request, url_for
from flask_login import login_required
from markupsafe import escape
from werkzeug.wrappers import Response

from app import context, inputs
from app.auth.grants import RUN_READ, RUN_START, TRIGGER_MANAGE
from app.calendar import CalendarError, parse_instant
from app.console import errors
from app.console.common import actor, command
from app.console.htmx import in_place, reply
from app.console.session import namespace_view
from app.errors import ValidationFailed
from app.schedules import manual, service, store
from app.schedules.config import MAX_REASON, OVERLAP_POLICIES
from app.schedules.tick.act import Act

bp = Blueprint("console_schedule_actions", __name__)
ONE = "/ns/<ns>/schedules/<schedule_id>"
RESULT = "schedules/_action_result.html"


def _detail(ns: str, schedule_id: str) -> str:
    return url_for("console_schedules.detail", ns=ns, schedule_id=schedule_id)


def back_to(args: dict[str, Any]) -> str:
    """Where an action on a schedule returns: the schedule's page."""
    return _detail(args["ns"], args["schedule_id"])


errors.register(bp, back_to=back_to)


def _revision() -> int | None:
    raw = request.form.get("revision", "")
    return inputs.ascii_int(raw)


@bp.post(f"{ONE}/pause")
@login_required
def pause(ns: str, schedule_id: str) -> Response:
    """Pause with an optional reason."""
    view = namespace_view(ns, TRIGGER_MANAGE)
    reason = request.form.get("reason", "").strip() or None
    if reason is not None and len(reason) > MAX_REASON:
        # As the API: refused whole rather than cut (nothing is written).
        raise ValidationFailed(
            [{"loc": ["reason"], "msg": f"must be at most {MAX_REASON} characters"}]
        )
    session = context.session()
    service.pause(
        session,
        context.now(),
        view.current,
        actor(),
        command(reason),
        schedule_id,
        _revision(),
        reason,
    )
    session.commit()
    return reply(f"Paused {schedule_id}.", True, _detail(ns, schedule_id))


@bp.post(f"{ONE}/resume")
@login_required
def resume(ns: str, schedule_id: str) -> Response:
    """Resume from a fresh future cursor, under the acting user's authority."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    service.resume(
        session, context.now(), view.current, actor(), command(), schedule_id, _revision()
    )
    session.commit()
    return reply(f"Resumed {schedule_id}.", True, _detail(ns, schedule_id))


@bp.post(f"{ONE}/delete")
@login_required
def delete(ns: str, schedule_id: str) -> Response:
    """Soft-delete the schedule; then go back to the list."""
    view = namespace_view(ns, TRIGGER_MANAGE)
    session = context.session()
    service.delete(
        session, context.now(), view.current, actor(), command(), schedule_id, _revision()
    )
    session.commit()
    done = f"Deleted {schedule_id}; its history stays readable."
    return reply(done, True, url_for("console_schedules.index", ns=ns))


@bp.post(f"{ONE}/trigger")
@login_required
@in_place(RESULT)
def trigger(ns: str, schedule_id: str) -> Response:
    """Start a run now under the schedule's overlap policy."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    session = context.session()
    result = manual.trigger(session, context.now(), view.current, command(), schedule_id)
    session.commit()
    return changed(_triggered(ns, schedule_id, result))


def _triggered(ns: str, schedule_id: str, result: Act) -> Response:
    """The result line for a trigger: the run it started, or why none started."""
    back = _detail(ns, schedule_id)
    if result.run_id:
        run_url = url_for("console_runs.detail", ns=ns, run_id=result.run_id)
        text = f"{result.outcome}: run {result.run_id}"
        return reply(text, True, back, ("Open the run", run_url))
    if result.outcome == "buffered":
        # Not a refusal: the occurrence waits for the schedule's active run to end.
        return reply("buffered: it starts once the schedule's active run has ended", True, back)
    skipped = f"{result.outcome}: {SKIP_TEXT.get(result.reason or '', result.reason)}"
    return reply(skipped, False, back)


def changed(response: Response) -> Response:
    """Have the schedule's page refresh what an action recorded (counters, ledger, runs): the
    answer itself fills only the result line (templates/schedules/_detail_body.html)."""
    response.headers["HX-Trigger"] = "schedule-changed"
    return response


def _range() -> tuple[Any, Any]:
    start = parse_instant(request.values.get("from", "").strip(), ("from",), round_up=True)
    end = parse_instant(request.values.get("to", "").strip(), ("to",), round_up=True)
    return start, end


SKIP_TEXT = {
    "overlap_policy_skip": "skipped by the overlap policy (a run of it would still be active)",
    "capacity": "refused for capacity (the namespace is at its run limit)",
    "max_runs_exhausted": "past max runs",
    "scheduled": "left to the scheduler (not reached yet)",
    "buffer_full": "the buffer is full",
}


@bp.get(f"{ONE}/backfill/count")
@login_required
def backfill_count(ns: str, schedule_id: str) -> str:
    """What a backfill of the range would do, decided as the backfill decides (a read: GET, no
    CSRF token in the URL). The answer is swapped into the page as HTML: it is escaped, since
    it may quote the query (a link could otherwise plant markup, and htmx attributes that act
    with the signed-in user's session, in the page)."""
    return str(escape(_count_text(ns, schedule_id)))


RANGE_LABELS = {"from": "From", "to": "To"}


def _count_text(ns: str, schedule_id: str) -> str:
    view = namespace_view(ns, RUN_READ)
    session = context.session()
    schedule = store.get(session, view.current, schedule_id)
    try:
        start, end = _range()
    except CalendarError as exc:
        # Named as the form labels its fields (From, To), not by the query's names.
        field = RANGE_LABELS.get(str(exc.loc[0]) if exc.loc else "", "Range")
        return f"{field}: {exc.msg}"
    if end <= start:
        return "To must be after From."
    override = request.args.get("overlap_policy") or None
    if override is not None and override not in OVERLAP_POLICIES:
        return f"Unknown overlap policy {override!r}."
    plan = manual.plan_backfill(session, view.current, schedule, start, end, override)
    if plan.refusal is not None:
        return f"A backfill would be refused: {plan.refusal}."
    if plan.too_large:
        return f"More than {manual.MAX_BACKFILL} occurrences: split the range."
    return plan_text(plan)


def plan_text(plan: manual.BackfillPlan) -> str:
    """E.g. "This range holds 4 occurrences: 1 run would start; 3 skipped by the overlap policy"."""
    plural = "s" if plan.occurrences != 1 else ""
    parts = [f"{plan.starts} run{'s' if plan.starts != 1 else ''} would start"]
    parts += [f"{n} {SKIP_TEXT.get(reason, reason)}" for reason, n in sorted(plan.skips.items())]
    if plan.already_started:
        parts.append(f"{plan.already_started} already started (not started again)")
    policy = plan.policy.replace("_", " ")
    head = f"This range holds {plan.occurrences} occurrence{plural}"
    return f"{head}: {'; '.join(parts)} (overlap policy: {policy})."


@bp.post(f"{ONE}/backfill")
@login_required
@in_place(RESULT)
def backfill(ns: str, schedule_id: str) -> Response:
    """Start a run for every canonical occurrence in [from, to)."""
    view = namespace_view(ns, TRIGGER_MANAGE, RUN_START)
    start, end = _range()
    session = context.session()
    override = request.form.get("overlap_policy") or None
    result = manual.backfill(
        session, context.now(), view.current, command(), schedule_id, start, end, override
    )
    session.commit()
    already = len(result.results) - result.started - result.skipped
    runs = "run" if result.started == 1 else "runs"
    text = (
        f"Backfill started {result.started} {runs}, skipped {result.skipped}, "
        f"{already} already started."
    )
    return changed(reply(text, True, _detail(ns, schedule_id)))
