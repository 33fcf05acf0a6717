"""Console forms <-> the request shape the schedules service takes, and errors back to fields."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from werkzeug.datastructures import MultiDict

from app import inputs
from app.calendar import CalendarError, Spec, SpecRangeError, parse_instant, validate_timezone
from app.calendar.occurrences import check_range
from app.errors import AlmanacError, BadRequest, ValidationFailed
from app.inputs import json_size
from app.schedules.config import (
    MAX_JSON_BYTES,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MAX_NOTES,
    MAX_RUNS_LIMIT,
    MAX_SEARCH_ATTRIBUTES,
    MAX_TIMEOUT_SECONDS,
    MISSED_POLICIES,
    OVERLAP_POLICIES,
    QUEUE,
    SCHEDULE_ID,
    SCHEDULE_ID_RULE,
    WORKFLOW_NAME,
    WORKFLOW_NAME_RULE,
    check_keyed_strings,
    label_pair,
)

TEXT_FIELDS = (
    "schedule_id",
    "timezone",
    "start_at",
    "end_at",
    "workflow",
    "activation_id",
    "queue",
    "overlap_policy",
    "missed_policy",
    "notes",
)
INT_FIELDS = ("execution_timeout_seconds", "run_timeout_seconds", "jitter_seconds", "max_runs")
JSON_FIELDS = ("input", "memo", "search_attributes")
FIELDS = (*TEXT_FIELDS, *INT_FIELDS, *JSON_FIELDS, "cron_expressions", "intervals", "labels")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def calendar_lines(text: str) -> list[str]:
    """A calendar field's lines as the API would take them: lines end at a browser's CRLF (or
    LF), and only plain spaces at their ends are dropped. A tab, a no-break space or a Unicode
    line separator stays in, so the grammar refuses it as it does through the API, instead of
    the form quietly reading it as a space or a second line."""
    lines = text.replace("\r\n", "\n").split("\n")
    return [line.strip(" ") for line in lines if line.strip(" ")]


def _fail(field: str, msg: str) -> ValidationFailed:
    return ValidationFailed([{"loc": [field], "msg": msg}])


def _json(form: MultiDict[str, str], field: str) -> Any:
    raw = form.get(field, "").strip()
    if not raw:
        return {} if field != "input" else {}
    try:
        return inputs.loads(raw, [field])
    except BadRequest as exc:
        raise _fail(field, exc.details["reason"]) from None


def _json_object(form: MultiDict[str, str], field: str) -> Any:
    """Memo and search attributes are objects: said in the first pass, not at the save."""
    value = _json(form, field)
    if not isinstance(value, dict):
        raise _fail(field, "must be an object")
    return value


def _int(form: MultiDict[str, str], field: str) -> int | None:
    raw = form.get(field, "").strip()
    if not raw:
        return None
    value = inputs.ascii_int(raw, signed=True)
    if value is None:
        raise _fail(field, "must be a whole number")
    return value


def _intervals(text: str) -> list[dict[str, str]]:
    """Lines like `PT6H` or `PT6H offset PT5M`."""
    intervals = []
    for line in calendar_lines(text):
        words = [word for word in line.split(" ") if word]
        if len(words) == 1:
            intervals.append({"every": words[0]})
        elif len(words) == 3 and words[1].lower() == "offset":
            intervals.append({"every": words[0], "offset": words[2]})
        else:
            raise _fail("intervals", f"{line!r}: write 'EVERY' or 'EVERY offset OFFSET'")
    return intervals


def _check_intervals(text: str) -> None:
    """Each interval line written right and meaning an interval, the line named when not."""
    for line, interval in zip(calendar_lines(text), _intervals(text), strict=True):
        try:
            Spec.from_dict({"intervals": [interval]})
        except CalendarError as exc:
            raise _fail("intervals", f"{line!r}: {exc.msg}") from None


def _labels(text: str) -> dict[str, Any]:
    """One `key:value` (or `key=value`) per line, read as the list filter reads them; a key
    given twice is refused, as a JSON body giving one key twice is (it kept the last value).
    Text starting with `{` (no key does) is a JSON object, as the API takes labels: it says
    values the lines cannot (a line break, edge spaces), which the save checks as the API's."""
    if text.strip().startswith("{"):
        value = _json(MultiDict({"labels": text}), "labels")
        if not isinstance(value, dict):
            raise _fail("labels", "must be an object")
        return value
    labels: dict[str, Any] = {}
    for line in _lines(text):
        key, value = label_pair(line, ("labels",))
        if key in labels:
            raise _fail("labels", f"the key {key!r} is given twice")
        labels[key] = value
    return labels


def spec_from_form(form: MultiDict[str, str]) -> dict[str, Any]:
    """The `spec` object of the form's calendar fields."""
    spec: dict[str, Any] = {
        "cron_expressions": calendar_lines(form.get("cron_expressions", "")),
        "intervals": _intervals(form.get("intervals", "")),
        "timezone": _calendar_text(form, "timezone") or "UTC",
    }
    for bound in ("start_at", "end_at"):
        spec[bound] = _calendar_text(form, bound) or None
    return spec


def _calendar_text(form: MultiDict[str, str], field: str) -> str:
    """A one-line calendar field as typed (an empty or blank one is left out): `" UTC "` is
    refused as the API refuses it, naming the zone it probably means."""
    raw = form.get(field, "")
    return raw if raw.strip() else ""


def request_from_form(
    form: MultiDict[str, str], stored: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The save request the form describes; 422 naming the field if unreadable. Editing the
    `stored` configuration, fields sent back untouched keep their stored values."""
    kept = {field: (stored or {}).get(field) for field in untouched(form, stored)}
    action: dict[str, Any] = {
        "workflow": form.get("workflow", "").strip() or None,
        "activation_id": form.get("activation_id", "").strip() or None,
        "input": _json(form, "input"),
        "execution_timeout_seconds": _int(form, "execution_timeout_seconds"),
        "run_timeout_seconds": _int(form, "run_timeout_seconds"),
        "queue": form.get("queue", "").strip() or None,
    }
    data: dict[str, Any] = {
        "spec": spec_from_form(form),
        "action": action,
        "overlap_policy": form.get("overlap_policy") or "skip",
        "missed_policy": form.get("missed_policy") or "skip",
        "jitter_seconds": _int(form, "jitter_seconds") or 0,
        "max_runs": _int(form, "max_runs"),
        "labels": kept["labels"] if "labels" in kept else _labels(form.get("labels", "")),
        "memo": _json(form, "memo"),
        "search_attributes": _json(form, "search_attributes"),
        # A browser sends a textarea's lines ending in CRLF; the API's text ends them in LF.
        "notes": form.get("notes", "").replace("\r\n", "\n").strip() or None,
    }
    if form.get("schedule_id", "").strip():
        data["schedule_id"] = form["schedule_id"].strip()
    return data | kept


# Fields whose text cannot say every stored value (a label value with a newline or edge spaces,
# notes with edge spaces): sent back as they were shown, they keep the stored value.
KEPT_WHEN_UNCHANGED = ("labels", "notes")


def untouched(form: MultiDict[str, str], stored: dict[str, Any] | None) -> list[str]:
    """The fields of `KEPT_WHEN_UNCHANGED` the form sends back exactly as the edit form showed
    the `stored` configuration: an edit that did not touch them must not change (trim,
    re-space) or refuse them."""
    if stored is None:
        return []
    shown = form_from_config("", stored)
    return [
        field
        for field in KEPT_WHEN_UNCHANGED
        if _line_ends(form.get(field, "")) == _line_ends(shown[field])
    ]


def _line_ends(text: str) -> str:
    """`text` with CRLF and CR line ends as LF: a browser shows a stored CR as a line break
    and sends every line break back as CRLF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def form_from_config(schedule_id: str, config: dict[str, Any]) -> dict[str, str]:
    """Form field values for a stored configuration (the edit form)."""
    spec, action = config["spec"], config["action"]
    intervals = [
        f"{i['every']} offset {i['offset']}"
        if i.get("offset") not in (None, "PT0S")
        else i["every"]
        for i in spec.get("intervals", [])
    ]
    values = {
        "schedule_id": schedule_id,
        "cron_expressions": "\n".join(spec.get("cron_expressions", [])),
        "intervals": "\n".join(intervals),
        "timezone": spec.get("timezone") or "UTC",
        "start_at": spec.get("start_at") or "",
        "end_at": spec.get("end_at") or "",
        "input": json.dumps(action.get("input", {}), indent=2),
        "labels": labels_text(config.get("labels") or {}),
        "memo": json.dumps(config.get("memo") or {}, indent=2),
        "search_attributes": json.dumps(config.get("search_attributes") or {}, indent=2),
        "notes": config.get("notes") or "",
        "overlap_policy": config.get("overlap_policy", "skip"),
        "missed_policy": config.get("missed_policy", "skip"),
    }
    for key in (
        "workflow",
        "activation_id",
        "queue",
        "execution_timeout_seconds",
        "run_timeout_seconds",
    ):
        values[key] = "" if action.get(key) is None else str(action[key])
    for key in ("jitter_seconds", "max_runs"):
        values[key] = "" if config.get(key) is None else str(config[key])
    return values


def labels_text(labels: dict[str, Any]) -> str:
    """The Labels field: `key:value` lines, or a JSON object when a value is not one line read
    back as itself (it holds a line break or another line separator, or spaces at its ends)."""
    if all(_one_line(value) for value in labels.values()):
        return "\n".join(f"{k}:{v}" for k, v in labels.items())
    return json.dumps(labels, indent=2, ensure_ascii=False)


def _one_line(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == value and len(value.splitlines()) <= 1


LABELS = {
    "schedule_id": "Schedule id",
    "cron_expressions": "Cron expressions",
    "intervals": "Intervals",
    "timezone": "Time zone",
    "start_at": "Start at",
    "end_at": "End at",
    "jitter_seconds": "Jitter seconds",
    "workflow": "Workflow",
    "activation_id": "Pinned activation id",
    "input": "Input",
    "execution_timeout_seconds": "Execution timeout",
    "run_timeout_seconds": "Run timeout",
    "queue": "Queue",
    "overlap_policy": "Overlap policy",
    "missed_policy": "Missed policy",
    "max_runs": "Max runs",
    "labels": "Labels",
    "memo": "Memo",
    "search_attributes": "Search attributes",
    "notes": "Notes",
}
# Whole numbers a form field takes: (lowest, highest or None).
INT_RANGES = {
    "execution_timeout_seconds": (1, MAX_TIMEOUT_SECONDS),
    "run_timeout_seconds": (1, MAX_TIMEOUT_SECONDS),
    "jitter_seconds": (0, 3600),
    "max_runs": (1, MAX_RUNS_LIMIT),
}
# The fields in the order the form shows them: the error summary lists mistakes in this order.
FIELD_ORDER = tuple(LABELS)


def form_errors(
    form: MultiDict[str, str],
    stored: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """Every mistake the form's fields hold, checked field by field in one pass with the rules
    the save applies to each field (the save then checks what needs the database: the
    workflow, its input schema, whether the id is taken). With `now`, an End at in the past is
    named too. Fields sent back untouched from the `stored` configuration are not read."""
    checks: dict[str, Callable[[], object]] = {
        "schedule_id": lambda: _schedule_id(form),
        "cron_expressions": lambda: [
            Spec.from_dict({"cron_expressions": [line]})
            for line in calendar_lines(form.get("cron_expressions", ""))
        ],
        "intervals": lambda: _check_intervals(form.get("intervals", "")),
        "timezone": lambda: validate_timezone(_calendar_text(form, "timezone") or "UTC"),
        "start_at": lambda: _instant(form, "start_at"),
        "end_at": lambda: _instant(form, "end_at"),
        "workflow": lambda: _matches(form, "workflow", WORKFLOW_NAME, WORKFLOW_NAME_RULE),
        "queue": lambda: _matches(
            form, "queue", QUEUE, "must be 1-64 letters, digits, '.', '_' or '-'"
        ),
        "labels": lambda: _keyed(
            "labels", _labels(form.get("labels", "")), MAX_LABELS, MAX_LABEL_VALUE
        ),
        "input": lambda: _sized("input", _json(form, "input")),
        "memo": lambda: _sized("memo", _json_object(form, "memo")),
        "search_attributes": lambda: _keyed(
            "search_attributes", _json_object(form, "search_attributes"), MAX_SEARCH_ATTRIBUTES
        ),
        "overlap_policy": lambda: _one_of(form, "overlap_policy", OVERLAP_POLICIES),
        "missed_policy": lambda: _one_of(form, "missed_policy", MISSED_POLICIES),
        "notes": lambda: _notes(form),
        **{name: partial(_bounded, form, name) for name in INT_FIELDS},
    }
    for name in untouched(form, stored):
        checks.pop(name, None)
    found: dict[str, str] = {}
    for name, check in checks.items():
        try:
            check()
        except ValidationFailed as exc:
            found[name] = errors_by_field(exc.details["errors"]).popitem()[1]
        except CalendarError as exc:
            found[name] = form_words(exc.msg)
    found.update(_whole_form_errors(form, found))
    if now is not None:
        found.update(_range_errors(form, found, now, stored))
    return found


CALENDAR_FIELDS = ("cron_expressions", "intervals", "timezone", "start_at", "end_at")


def _range_errors(
    form: MultiDict[str, str], found: dict[str, str], now: datetime, stored: dict[str, Any] | None
) -> dict[str, str]:
    """A readable calendar that never fires again (an End at in the past), named as the save
    would refuse it: under the field to change. An edit that keeps the stored calendar is not
    checked, as the save does not check it (a finished schedule's notes may still change)."""
    if any(name in found for name in CALENDAR_FIELDS):
        # The calendar cannot be read whole, but an End at already past means no firing
        # whatever it is: said now too, not held back for a second submit.
        return {} if "end_at" in found else _end_passed(form, now)
    try:
        spec = Spec.from_dict(spec_from_form(form))
        if stored is not None and spec.to_dict() == Spec.from_dict(stored["spec"]).to_dict():
            return {}
        check_range(spec, now)
    except CalendarError as exc:
        # A mistake of the calendar as a whole (End at before Start at): named now, beside the
        # others, under its field when it has one (else the save names it).
        named = errors_by_field([{"loc": list(exc.loc), "msg": form_words(exc.msg)}])
        return {} if "__all__" in named else named
    except ValidationFailed:
        return {}  # the save names it
    except SpecRangeError as exc:
        return range_errors(exc, form)
    return {}


def _end_passed(form: MultiDict[str, str], now: datetime) -> dict[str, str]:
    typed = _calendar_text(form, "end_at").strip()
    if not typed:
        return {}
    try:
        end = parse_instant(typed, ("end_at",))
    except CalendarError:
        return {}
    if end > now:
        return {}
    return {"end_at": END_PASSED.format(typed=typed)}


END_PASSED = (
    "{typed} is in the past, so the schedule would never fire: choose a later time, or leave it "
    "empty"
)


def range_errors(exc: SpecRangeError, form: MultiDict[str, str]) -> dict[str, str]:
    """A calendar with no occurrence ahead, under the field to change and in the form's words
    (its labels, not the API's `end_at`)."""
    if "end_at" in exc.loc:
        typed = _calendar_text(form, "end_at").strip()
        return {"end_at": END_PASSED.format(typed=typed)}
    words = exc.msg.replace("the spec", "the calendar")
    words = words.replace("start_at", "Start at").replace("end_at", "End at")
    return {"cron_expressions": words}


def _matches(form: MultiDict[str, str], field: str, rule: Any, says: str) -> None:
    raw = form.get(field, "").strip()
    if raw and not rule.fullmatch(raw):
        raise _fail(field, says)


def _keyed(field: str, value: Any, most: int, longest: int | None = None) -> None:
    """Labels or search attributes by the save's rule (string values, keys a filter can name);
    the message names the key, as the save's does (`errors_by_field`)."""
    check_keyed_strings(value, field, most, longest)


def _sized(field: str, value: Any) -> None:
    if json_size(value) > MAX_JSON_BYTES:
        raise _fail(field, f"must be at most {MAX_JSON_BYTES} bytes of JSON")


def _one_of(form: MultiDict[str, str], field: str, allowed: tuple[str, ...]) -> None:
    value = form.get(field)
    if value and value not in allowed:
        raise _fail(field, f"must be one of {', '.join(allowed)}")


def _notes(form: MultiDict[str, str]) -> None:
    if len(form.get("notes", "").replace("\r\n", "\n").strip()) > MAX_NOTES:
        raise _fail("notes", f"must be at most {MAX_NOTES} characters")


def _whole_form_errors(form: MultiDict[str, str], found: dict[str, str]) -> dict[str, str]:
    errors = {}
    if not any(form.get(name, "").strip() for name in ("cron_expressions", "intervals")):
        if "cron_expressions" not in found:
            errors["cron_expressions"] = "give at least one cron expression or interval"
    targets = [name for name in ("workflow", "activation_id") if form.get(name, "").strip()]
    if not targets:
        errors["workflow"] = "name a workflow (or pin an activation id)"
    elif len(targets) == 2:
        errors["activation_id"] = "give a workflow or a pinned activation id, not both"
    return errors


def _schedule_id(form: MultiDict[str, str]) -> None:
    raw = form.get("schedule_id", "").strip()
    if raw and not SCHEDULE_ID.fullmatch(raw):
        raise _fail("schedule_id", SCHEDULE_ID_RULE)


def _instant(form: MultiDict[str, str], field: str) -> None:
    raw = _calendar_text(form, field)
    if raw:
        parse_instant(raw, (field,))


def bounded_int(form: MultiDict[str, str], field: str) -> int | None:
    """A whole-number field within its range (`INT_RANGES`), or 422 naming it."""
    _bounded(form, field)
    return _int(form, field)


def _bounded(form: MultiDict[str, str], field: str) -> None:
    value = _int(form, field)
    low, high = INT_RANGES.get(field, (0, None))
    if value is not None and (value < low or (high is not None and value > high)):
        within = f"from {low} to {high}" if high is not None else f"of {low} or more"
        raise _fail(field, f"must be a whole number {within}, or empty")


def summary(errors: dict[str, str]) -> list[tuple[str, str, str]]:
    """The error summary at the top of a form: (field id, its label, the message)."""

    def place(name: str) -> int:
        return FIELD_ORDER.index(name) if name in FIELD_ORDER else len(FIELD_ORDER)

    def said(label: str, msg: str) -> str:
        # Listed after its label: "End at: must not be before Start at", not "End at: End at …".
        return msg.removeprefix(label + " ") if msg.startswith(label + " must") else msg

    return [
        (name, LABELS.get(name, "Form"), said(LABELS.get(name, "Form"), errors[name]))
        for name in sorted(errors, key=place)
        if name != "__all__"
    ]


def errors_of(exc: Exception, form: MultiDict[str, str]) -> dict[str, str]:
    """A refusal of the save (or of the form's simulation, which checks as the save does) as
    form errors: under the field to change, in the form's words (`__all__` when none fits)."""
    if isinstance(exc, CalendarError):
        return errors_by_field([{"loc": list(exc.loc), "msg": form_words(exc.msg)}])
    if isinstance(exc, SpecRangeError):
        return range_errors(exc, form)
    if isinstance(exc, AlmanacError) and exc.details.get("errors"):
        return errors_by_field(exc.details["errors"])
    return {"__all__": getattr(exc, "message", str(exc))}


# A field's API name in a calendar message, not quoted (a quoted one is what someone typed).
_API_NAMES = re.compile(
    r"(?<![\w'\"])(" + "|".join(name for name in LABELS if "_" in name) + r")(?![\w'\"])"
)


def form_words(msg: str) -> str:
    """A calendar message in the form's words: `end_at must not be before start_at` names the
    fields by their labels (End at, Start at)."""
    return _API_NAMES.sub(lambda match: LABELS[match[1]], msg)


def labelled(errors: dict[str, str]) -> list[tuple[str | None, str]]:
    """Form errors as (the field's label, the message) in the order the fields appear; an error
    no field fits comes last, with no label."""
    found: list[tuple[str | None, str]] = [(label, msg) for _, label, msg in summary(errors)]
    if "__all__" in errors:
        found.append((None, errors["__all__"]))
    return found


def field_of(loc: list[Any]) -> str:
    """The form field an error location points at (`__all__` when none fits)."""
    parts = [p for p in loc if isinstance(p, str) and p not in ("spec", "action", "body")]
    for part in parts:
        if part in FIELDS:
            return part
        if part == "cron":
            return "cron_expressions"
        if part == "id":
            return "schedule_id"
    return "__all__"


# Fields of keyed values, whose errors name the key after the field (`labels.<key>`).
KEYED_FIELDS = ("labels", "search_attributes")


def errors_by_field(errors: list[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for error in errors:
        loc = list(error.get("loc", []))
        field, msg = field_of(loc), str(error.get("msg", "invalid"))
        found.setdefault(field, _naming_key(field, loc, msg))
    return found


def _naming_key(field: str, loc: list[Any], msg: str) -> str:
    """`msg` naming the key of labels or search attributes it is about (the API's loc says
    `labels.<key>`; under the field, the message alone did not say which)."""
    if field not in KEYED_FIELDS or field not in loc or loc[-1] == field:
        return msg
    key = str(loc[loc.index(field) + 1])
    return f"the value of {key!r} {msg}" if msg.startswith("must") else f"{key!r}: {msg}"
