"""Calendar preview (docs/calendar.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from app import calendar, context
from app.api import errors
from app.api.models import PreviewIn
from app.api.routing import operation, parse_body
from app.auth.grants import RUN_READ
from app.db import Namespace
from app.schedules.config import spec_error, spec_request
from app.schedules.simulate_start import preview_start

bp = Blueprint("api_calendar", __name__)
errors.register(bp)


@operation(
    bp,
    "POST",
    "/calendar/preview",
    summary="Preview the next due times of a spec",
    grant=RUN_READ,
    body=PreviewIn,
    namespaced=True,
)
def preview(namespace: Namespace) -> Any:
    """Return the next due times of a spec, with DST notes."""
    body = parse_body(PreviewIn)
    calendar_fields = body.model_dump(include={"spec", "cron", "timezone"}, exclude_unset=True)
    try:
        spec = calendar.Spec.from_dict(spec_request(calendar_fields))
    except calendar.CalendarError as exc:
        raise spec_error(calendar_fields, exc) from None
    start = preview_start(context.session(), namespace, body.schedule_id, spec, context.now())
    # An empty `after` is a bad instant, not "now" (leave the field out for now).
    after = (
        calendar.parse_instant(body.after, ("after",)) if body.after is not None else start.after
    )
    # Left out, the jitter is the named schedule's own; given (null is 0, as in a save), the
    # jitter it would be saved with.
    given = "jitter_seconds" in body.model_fields_set
    jitter = (body.jitter_seconds if given else start.jitter_seconds) or 0
    if body.after is None:
        items = start.due_times(spec, body.count, jitter, context.now())
    else:
        items = calendar.preview(spec, after, body.count, uid=start.uid, jitter_seconds=jitter)
    return jsonify({"occurrences": [item.to_dict() for item in items]})
