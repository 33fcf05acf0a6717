"""The run page's Gantt bars and steps table rows, written in Python.

A run of 200 steps has 200 bars and 200 table rows of about 15 values each; through Jinja that
is thousands of filter calls and escapes per page, most of them for numbers. Here only text
that comes from the run (step names, lanes, outputs, errors) is escaped, and the markup is the
same the templates wrote (classes only: the content security policy forbids `style=`).
"""

from __future__ import annotations

from datetime import datetime

from flask import Flask
from markupsafe import Markup, escape

from app.console.filters import pretty_json
from app.console.gantt import Gantt, short_duration
from app.console.timefmt import utc
from app.runs.steps_view import RunSteps

# Jinja's `truncate(28, true, '…')` with its default leeway of 5 characters.
LABEL_CHARS, LABEL_LEEWAY = 28, 5


def _label(text: str) -> str:
    if len(text) <= LABEL_CHARS + LABEL_LEEWAY:
        return text
    return text[: LABEL_CHARS - 1] + "…"


def gantt_bars(chart: Gantt) -> Markup:
    """Each step's lane band, label and bar (with its hover title)."""
    parts: list[str] = []
    for bar in chart.bars:
        row = bar.row
        if bar.lane_band:
            parts.append(
                f'<rect x="0" y="{bar.y}" width="{chart.width}" height="22" class="lane-band"/>'
            )
        title = f"{row.node_id} in {row.lane_label}" if row.lane else row.node_id
        title += f": {row.status}, {short_duration(bar.duration)}"
        if row.attempts > 1:
            title += f", attempt {row.attempts}"
        parts.append(
            f'<text x="{bar.label_x}" y="{bar.y + 15}" class="step-label">'
            f"{escape(_label(row.node_id))}</text>\n"
            f'<rect x="{bar.x:.2f}" y="{bar.y + 4}" width="{bar.width:.2f}" height="14" rx="2" '
            f'class="step-bar {bar.css}"><title>{escape(title)}</title></rect>'
        )
    return Markup("\n".join(parts))


def _time(value: datetime) -> str:
    return f'<time datetime="{value.isoformat()}">{utc(value)}</time>'


def _folded(summary: str, value: object) -> str:
    return f"<details><summary>{summary}</summary><pre>{escape(pretty_json(value))}</pre></details>"


def steps_rows(steps: RunSteps, now: datetime) -> Markup:
    """The steps table's rows: step, branch, type, status, attempts, start, end, duration,
    output (or error)."""
    parts: list[str] = []
    for row in steps.rows:
        node = escape(row.node_id)
        status = escape(row.status)
        status_css = escape(row.status.replace(" ", "_"))
        held = ' <span class="muted small">held</span>' if row.held else ""
        if row.skipped_by is not None:
            who = escape(row.skipped_by) if row.skipped_by else "an operator"
            held += f' <span class="muted small">by {who} (incident resolved with Skip)</span>'
        ended = _time(row.ended_at) if row.ended_at else "—"
        so_far = "" if row.ended_at else '<span class="muted small"> so far</span>'
        if row.output is not None:
            output = _folded("output", row.output)
        elif row.error:
            output = _folded("error", row.error)
        else:
            output = "—"
        parts.append(
            f'<tr id="step-{node}" class="depth-{min(row.depth, 4)}">'
            f'<td data-label="Step"><code>{node}</code></td>'
            f'<td data-label="Branch">{escape(row.lane_label or "—")}</td>'
            f'<td data-label="Type">{escape(row.kind)}</td>'
            f'<td data-label="Status"><span class="badge status-{status_css}">'
            f"{status}</span>{held}</td>"
            f'<td data-label="Attempts">{row.attempts}</td>'
            f'<td data-label="Start">{_time(row.started_at)}</td>'
            f'<td data-label="End">{ended}</td>'
            f'<td data-label="Duration">{short_duration(row.duration(now))}{so_far}</td>'
            f'<td data-label="Output">{output}</td></tr>'
        )
    return Markup("\n".join(parts))


def register(app: Flask) -> None:
    app.jinja_env.filters |= {"gantt_bars": gantt_bars, "steps_rows": steps_rows}
