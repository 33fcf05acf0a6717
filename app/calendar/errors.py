"""Errors raised by the calendar engine; both are ValueErrors so callers can map them to 422."""

from __future__ import annotations

Loc = tuple[str | int, ...]


class CalendarError(ValueError):
    """An invalid calendar, spec or argument; `loc` names the offending field.

    `code` is the API error code: `CALENDAR_INVALID` for grammar and meaning, `VALIDATION` for
    input that breaks a size or range limit (too many expressions, an instant in year 9999).
    """

    def __init__(self, msg: str, loc: Loc = (), code: str = "CALENDAR_INVALID") -> None:
        super().__init__(msg)
        self.msg = msg
        self.loc: Loc = tuple(loc)
        self.code = code

    def within(self, *prefix: str | int) -> CalendarError:
        """Return the same error with `prefix` prepended to its location."""
        return CalendarError(self.msg, (*prefix, *self.loc), self.code)

    def located(self) -> str:
        """ "cron.minute: 60 is out of range 0-59": the location once, even when the message
        already starts with the field's name (as the grammar's messages do)."""
        if not self.loc:
            return self.msg
        name, msg = str(self.loc[-1]), self.msg
        if msg.startswith(f"{name}: "):
            msg = msg[len(name) + 2 :]
        return f"{'.'.join(map(str, self.loc))}: {msg}"

    def __repr__(self) -> str:
        return f"CalendarError({self.msg!r}, loc={self.loc!r})"


class SpecRangeError(ValueError):
    """A valid spec that has no occurrence in the next 50 years (SCHEDULE_RANGE); `loc` names
    the field to change: `spec.end_at` when it is past, else the spec as a whole."""

    def __init__(self, msg: str, loc: Loc = ("spec",)) -> None:
        super().__init__(msg)
        self.msg = msg
        self.loc: Loc = tuple(loc)
