"""Jinja filters for times (app/console/timefmt.py) and JSON: absolute, relative, pretty JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flask import Flask

from app.console.event_lines import event_line
from app.console.timefmt import absolute, in_zone, other, relative, shown_zone, utc


def fromiso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def pretty_json(value: Any) -> str:
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
    }
