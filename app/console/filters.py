"""Jinja filters for times (app/console/timefmt.py) and JSON: absolute, relative, pretty JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flask import Flask

from app.console.event_lines import event_line
from app.console.gantt import short_duration
from app.console.timefmt import absolute, in_zone, other, relative, shown_zone, utc


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


def register(app: Flask) -> None:
    app.jinja_env.globals["shown_zone"] = shown_zone
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
    }
