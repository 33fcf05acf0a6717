"""The strict five-field cron grammar: tokenize, whitelist, expand to value sets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from app.calendar.errors import CalendarError

MAX_EXPRESSION_LENGTH = 256
MAX_LIST_TERMS = 32
# Longest month per month number; 29 for February because leap years make 29 Feb occur.
MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

_NUMBER = re.compile(r"[0-9]{1,2}", re.ASCII)
_ALLOWED = frozenset("0123456789*,-/")
_LETTERS = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class FieldRule:
    """Name and inclusive bounds of one cron field."""

    name: str
    low: int
    high: int

    @property
    def size(self) -> int:
        return self.high - self.low + 1


FIELD_RULES = (
    FieldRule("minute", 0, 59),
    FieldRule("hour", 0, 23),
    FieldRule("day of month", 1, 31),
    FieldRule("month", 1, 12),
    FieldRule("day of week", 0, 6),
)


@dataclass(frozen=True)
class CronFields:
    """A validated expression expanded to sorted value tuples (day of week: Sunday = 0)."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]

    @property
    def every_hour(self) -> bool:
        """True when the hour field matches all 24 hours (the absolute-time mode)."""
        return len(self.hours) == 24

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(self.expression.split(" "))


def validate_calendar(expr: str) -> None:
    """Raise CalendarError (message and loc naming the field) unless `expr` follows the grammar."""
    parse_calendar(expr)


@lru_cache(maxsize=16384)
def parse_calendar(expr: str) -> CronFields:
    """Validate `expr` and expand it; cached because the ticker asks for the same ones all day."""
    texts = _split_fields(expr)
    sets = [_parse_field(text, rule) for text, rule in zip(texts, FIELD_RULES, strict=True)]
    if texts[2] != "*" and texts[4] != "*":
        raise CalendarError(
            "day of month: at least one of day of month and day of week must be '*'",
            ("day of month",),
        )
    if texts[4] == "*":
        _check_possible(sets[2], sets[3])
    minutes, hours, days, months, weekdays = (tuple(sorted(values)) for values in sets)
    return CronFields(" ".join(texts), minutes, hours, days, months, weekdays)


def _split_fields(expr: str) -> list[str]:
    if not isinstance(expr, str):
        raise CalendarError("expression must be a string")
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise CalendarError(f"expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    stripped = expr.strip(" ")
    if stripped.startswith("@"):
        raise CalendarError(
            f"macros like {stripped.split(' ')[0]!r} are not allowed; write five numeric fields"
        )
    if any(ch.isspace() and ch != " " for ch in stripped):
        raise CalendarError("fields must be separated by spaces (no tabs or line breaks)")
    texts = stripped.split()
    if len(texts) != len(FIELD_RULES):
        raise CalendarError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(texts)}"
            + ("; seconds and year fields are not allowed" if len(texts) > 5 else "")
        )
    return texts


def _parse_field(text: str, rule: FieldRule) -> set[int]:
    try:
        _check_characters(text)
        terms = text.split(",")
        if len(terms) > MAX_LIST_TERMS:
            raise ValueError(f"a list has at most {MAX_LIST_TERMS} terms, got {len(terms)}")
        values: set[int] = set()
        for term in terms:
            values.update(_parse_term(term, rule))
        return values
    except ValueError as exc:
        raise CalendarError(f"{rule.name}: {exc}", (rule.name,)) from None


def _check_characters(text: str) -> None:
    if all(ch in _ALLOWED for ch in text):
        return
    words = _LETTERS.findall(text)
    if any(len(word) >= 3 for word in words):
        raise ValueError(f"names are not allowed ({text!r}); use numbers")
    if words:
        raise ValueError(f"{words[0]!r} is not supported")
    bad = next(ch for ch in text if ch not in _ALLOWED)
    raise ValueError(f"{bad!r} is not supported")


def _parse_term(term: str, rule: FieldRule) -> range:
    if not term:
        raise ValueError("empty list term")
    base, slash, step_text = term.partition("/")
    step = _parse_step(step_text, rule) if slash else 1
    if base == "*":
        return range(rule.low, rule.high + 1, step)
    low_text, dash, high_text = base.partition("-")
    if slash and not dash:
        raise ValueError(f"a step needs '*' or a range before it, not {base!r} ({term!r})")
    low = _parse_number(low_text, rule)
    high = _parse_number(high_text, rule) if dash else low
    if low > high:
        raise ValueError(f"range {low}-{high} is reversed; ranges cannot wrap around")
    return range(low, high + 1, step)


def _parse_step(text: str, rule: FieldRule) -> int:
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"step {text!r} must be a number of one or two digits")
    step = int(text)
    if not 1 <= step <= rule.size:
        raise ValueError(f"step {step} is out of range 1-{rule.size}")
    return step


def _parse_number(text: str, rule: FieldRule) -> int:
    if not _NUMBER.fullmatch(text):
        if text.isdigit():
            raise ValueError(f"number {text!r} has more than two digits")
        raise ValueError(f"expected a number, '*', a range or a step, got {text!r}")
    value = int(text)
    if not rule.low <= value <= rule.high:
        raise ValueError(f"{value} is out of range {rule.low}-{rule.high}")
    return value


def _check_possible(days: set[int], months: set[int]) -> None:
    longest = max(MONTH_DAYS[month - 1] for month in months)
    first_day = min(days)
    if first_day > longest:
        raise CalendarError(
            f"day of month: the calendar can never occur: day {first_day} does not exist "
            f"in the selected months (they have at most {longest} days)",
            ("day of month",),
        )
