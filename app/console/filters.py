"""Jinja filters for times (app/console/timefmt.py) and JSON: absolute, relative, pretty JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from flask import Flask, request
from markupsafe import Markup, escape

from app.console.event_lines import event_line
from app.console.gantt import short_duration
from app.console.redirects import page_path
from app.console.timefmt import absolute, in_zone, other, relative, shown_zone, utc
from app.runs.overview import RecentRun
from app.schedules.config import MAX_REASON


def fromiso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


# A value that fits on one line this long is shown on one line.
ONE_LINE = 60


def pretty_json(value: Any) -> str:
    """Indented JSON, or one line when short: the run page shows hundreds of small payloads, and
    only the one-line form has the fast (C) encoder."""
    compact = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(compact) <= ONE_LINE:
        return compact
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def url_part(value: Any) -> str:
    """`value` quoted as `url_for` quotes a path part (the same safe characters), so a page
    that links hundreds of runs builds their URL once and appends each id."""
    return quote(str(value), safe="!$&'()*+,/:;=@")


def run_squares(runs: list[RecentRun], base: str) -> Markup:
    """A schedule's last runs as squares linking to `base` + the run id (the schedules list
    draws 500 of them a page: written here, not by a template macro, with only the run-supplied
    text escaped)."""
    if not runs:
        return Markup('<span class="muted small">no runs yet</span>')
    parts = ['<span class="squares">']
    for run in runs:
        run_id, status = escape(run.run_id), escape(run.status)
        href = escape(base + url_part(run.run_id))
        # When the run was made (fired or started by a call); its first step may begin later.
        title = f"{run_id}: {escape(run.status.replace('_', ' '))}, created {utc(run.created_at)}"
        parts.append(
            f'<a class="square run-{status}" href="{href}" title="{title}">'
            f'<span class="visually-hidden">{run_id}: {status}</span></a>'
        )
    parts.append("</span>")
    return Markup("".join(parts))


def first_page_url() -> str | None:
    """This list's first page (the same filters, no cursor) when the page shown is a later one
    (it has a `cursor`), else None."""
    if not request.args.get("cursor"):
        return None
    kept = [(name, value) for name, value in request.args.items(multi=True) if name != "cursor"]
    return request.path + (f"?{urlencode(kept)}" if kept else "")


def register(app: Flask) -> None:
    app.jinja_env.globals["first_page_url"] = first_page_url
    app.jinja_env.globals["shown_zone"] = shown_zone
    app.jinja_env.globals["max_reason"] = MAX_REASON
    app.jinja_env.globals["page_path"] = page_path
    app.jinja_env.filters |= {
        "utc": utc,
        "in_zone": in_zone,
        "relative": relative,
        "absolute": absolute,
        "other_time": other,
        "pretty_json": pretty_json,
        "fromiso": fromiso,
        "event_line": event_line,
        "short_duration": short_duration,
        "url_part": url_part,
        "run_squares": run_squares,
    }
