"""Jinja filters for times and JSON: absolute UTC, a zone's wall clock, relative, pretty JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import Flask

from app.console.event_lines import event_line


def utc(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def in_zone(value: datetime | None, zone: str) -> str:
    if value is None:
        return "—"
    return value.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M:%S %z ({zone})")


def relative(value: datetime | None, now: datetime) -> str:
    """ "in 5 min", "3 h ago": coarse, for scanning a list."""
    if value is None:
        return "—"
    seconds = (value - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "just now"
    if size < 60:
        text = f"{int(size)} s"
    elif size < 3600:
        text = f"{int(size // 60)} min"
    elif size < 86400 * 2:
        text = f"{size / 3600:.1f} h".replace(".0 h", " h")
    else:
        text = f"{int(size // 86400)} d"
    return f"in {text}" if seconds >= 0 else f"{text} ago"


def fromiso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def register(app: Flask) -> None:
    app.jinja_env.filters |= {
        "utc": utc,
        "in_zone": in_zone,
        "relative": relative,
        "pretty_json": pretty_json,
        "fromiso": fromiso,
        "event_line": event_line,
    }
