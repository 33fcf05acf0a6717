"""The incidents of a namespace: open or resolved, newest first, with Retry / Skip / Fail.

Resolving goes through the run page's own route (`console_runs.resolve_incident`), which comes
back here when the form says so.
"""

from __future__ import annotations

from flask import Blueprint, url_for
from flask_login import login_required
from werkzeug.wrappers import Response

from app import context
from app.auth.grants import RUN_READ
from app.console import errors
from app.console.common import chosen, next_cursor, page_key
from app.console.htmx import render
from app.console.session import namespace_view
from app.runs import incidents

bp = Blueprint("console_incidents", __name__)
PAGE_SIZE = 50


@bp.get("/ns/<ns>/incidents")
@login_required
def index(ns: str) -> Response:
    """Open incidents (or resolved ones), one keyset page; controls for run.manage only."""
    view = namespace_view(ns, RUN_READ)
    status = chosen("status", incidents.STATUSES, "open", once=True)[0]
    session = context.session()
    rows, key = incidents.list_incidents(
        session,
        view.current,
        PAGE_SIZE,
        page_key(ns, "incidents", {"status": status}),
        status=status,
    )
    ending = incidents.runs_being_cancelled(session, [incident for incident, _run_id in rows])
    cursor = next_cursor(ns, "incidents", key, {"status": status})
    next_url = url_for(".index", ns=ns, status=status, cursor=cursor) if cursor else None
    return render(
        "incidents/index.html",
        "incidents/_rows.html",
        ns=view,
        incidents=rows,
        ending=ending,
        incident_status=status,
        statuses=incidents.STATUSES,
        next_url=next_url,
        back=url_for(".index", ns=ns, status=status),
        now=context.now(),
    )


errors.register(bp)
