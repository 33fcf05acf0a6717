"""Every API operation, written once for both clients.

Each method builds a `Call` and hands it to `_call` (one response), `_walk` (every page of a
`next_cursor` list) or `_walk_history` (every page of an `after_sequence` stream). `Client`
implements those three synchronously; `AsyncClient` as coroutines and async generators, so the
same method returns a value on one and an awaitable (or an async iterator) on the other.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

from almanac import models as m
from almanac.errors import InvalidId, NotUnicode
from almanac.transport import Call, query_pairs

if TYPE_CHECKING:
    from almanac.aio import AsyncClient, AsyncPager
    from almanac.client import Pager

T = TypeVar("T")
P = ParamSpec("P")
Parse = Callable[[Any], T]


# How each operation reads on each client, for the type checker. An `@endpoint` method returns
# what `_call` returns: the parsed result on `Client`, a coroutine of it on `AsyncClient` (whose
# `_call` is a coroutine function). A `@paged` method returns what `_walk` or `_walk_history`
# returns: a `Pager` on `Client`, an `AsyncPager` on `AsyncClient`. The annotations of the
# methods themselves are the `Client` ones. At run time both decorators hand the function back
# unchanged: only the types differ, and only per client.
if TYPE_CHECKING:

    class endpoint(Generic[P, T]):
        def __init__(self, method: Callable[Concatenate[Any, P], T]) -> None: ...

        @overload
        def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], T]: ...
        @overload
        def __get__(self, obj: AsyncClient, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
        @overload
        def __get__(self, obj: object, owner: type) -> Callable[P, T]: ...
        def __get__(self, obj: object, owner: type) -> Any: ...

    class paged(Generic[P, T]):
        def __init__(self, method: Callable[Concatenate[Any, P], Iterator[T]]) -> None: ...

        @overload
        def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], Iterator[T]]: ...
        @overload
        def __get__(self, obj: AsyncClient, owner: type) -> Callable[P, AsyncPager[T]]: ...
        @overload
        def __get__(self, obj: object, owner: type) -> Callable[P, Pager[T]]: ...
        def __get__(self, obj: object, owner: type) -> Any: ...

else:

    def endpoint(method):
        return method

    paged = endpoint


# What the path segment after each of these names, for the error about a segment no id can be.
SEGMENT_NAMES = {
    "namespaces": "namespace",
    "schedules": "schedule id",
    "runs": "run id",
    "signals": "signal name",
    "workflows": "workflow name",
    "activations": "activation id",
    "tasks": "task id",
    "incidents": "incident id",
}


def segment(value: str, what: str = "id") -> str:
    """One path segment, `what` naming it in errors: ids may hold ':' and '.', never '/'.

    A segment of only `.` or `..` is sent as `%2E`s: left as is, URL normalization would drop it
    (or the segment before it) and the request would reach another resource. One holding '/'
    (the server decodes `%2F` before routing, so it would reach another route) or empty is
    `InvalidId`; one that is not Unicode text (a lone surrogate) is `NotUnicode`. No id or
    namespace the server accepts is any of these, so nothing is sent.
    """
    text = str(value)
    if not text:
        raise InvalidId(f"the {what} is empty, which no {what} is; nothing was sent")
    if "/" in text:
        raise InvalidId(
            f"the {what} {text!r} holds '/', which no {what} can (the server would route the "
            "request elsewhere); nothing was sent"
        )
    try:
        text = quote(text, safe=":@")
    except UnicodeEncodeError:
        raise NotUnicode(
            f"the {what} {value!r} is not valid Unicode text (it holds a lone surrogate), "
            f"which no {what} can be; nothing was sent"
        ) from None
    return text.replace(".", "%2E") if text in (".", "..") else text


def instant(value: datetime | str) -> str:
    """An instant as the API takes it (ISO-8601 UTC); strings pass through unchanged."""
    if isinstance(value, str):
        return value
    text = value.isoformat()
    return text.replace("+00:00", "Z")


def if_match(revision: int | None) -> dict[str, str | bytes]:
    return {} if revision is None else {"If-Match": f'"{int(revision)}"'}


def _params(**values: Any) -> list[tuple[str, str]]:
    """Query parameters, leaving out None; booleans as true/false; lists repeat the name."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        if value is None:
            continue
        for each in value if isinstance(value, list | tuple) else [value]:
            text = ("true" if each else "false") if isinstance(each, bool) else str(each)
            pairs.append((name, text))
    return pairs


Labels = Mapping[str, str] | Iterable[tuple[str, str]]


def _pairs(values: Labels | None) -> list[str] | None:
    """`key:value` filters; given as pairs a key may repeat (every pair must match)."""
    if values is None:
        return None
    pairs = values.items() if isinstance(values, Mapping) else values
    return [f"{k}:{v}" for k, v in pairs]


def _body(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _window(from_: datetime | str, to: datetime | str, run_duration: str | None) -> dict[str, Any]:
    """A simulation's window [from_, to) and the run duration it assumes (if given)."""
    return _body(run_duration=run_duration) | {"from": instant(from_), "to": instant(to)}


class Operations:
    """The API surface shared by `Client` and `AsyncClient` (see the module docstring)."""

    namespace: str

    def _call(self, call: Call, parse: Parse[T]) -> Any:
        raise NotImplementedError

    def _walk(self, call: Call, parse: Parse[T]) -> Any:
        raise NotImplementedError

    def _walk_history(self, call: Call, parse: Parse[T]) -> Any:
        raise NotImplementedError

    def _ns(self, *parts: str) -> str:
        """The path of `parts` in the client's namespace; an id that no request can carry is
        refused naming what the segment before it says it is (`schedules`: a schedule id)."""
        names = ["namespaces", self.namespace, *parts]
        kinds = [SEGMENT_NAMES.get(before, "id") for before in names[:-1]]
        return "/namespaces/" + "/".join(map(segment, names[1:], kinds))

    def _request_call(
        self,
        method: str,
        path: str,
        params: Any = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Call:
        """`request()`'s call: in the client's namespace, as every other method is.

        A short route (`/runs`) takes its namespace from `X-Namespace` and reads `default`
        without it, so the bound namespace is sent there, unless the caller sends their own
        `X-Namespace` or the path names one (`/namespaces/{ns}/...`, which the server prefers).
        """
        sent: dict[str, str | bytes] = dict(headers or {})
        names_one = path.lstrip("/").startswith("namespaces/")
        if not names_one and not any(key.lower() == "x-namespace" for key in sent):
            segment(self.namespace, "namespace")  # empty, '/' or not Unicode: nothing is sent
            # The server reads the header as UTF-8; httpx would encode a str as ASCII only.
            sent["X-Namespace"] = self.namespace.encode("utf-8")
        return Call(method, path, query_pairs(params), json, sent)

    # --- identity and namespaces -------------------------------------------------------------

    @endpoint
    def me(self) -> m.Me:
        """Who the token belongs to and the caller's namespaces with roles."""
        return self._call(Call("GET", "/me"), m.Me.from_json)

    @endpoint
    def health(self) -> dict[str, Any]:
        return self._call(Call("GET", "/health"), dict)

    @paged
    def list_namespaces(self) -> Iterator[m.Namespace]:
        return self._walk(Call("GET", "/namespaces"), m.Namespace.from_json)

    @endpoint
    def create_namespace(self, name: str, max_active_runs: int | None = None) -> m.Namespace:
        body = _body(name=name, max_active_runs=max_active_runs)
        return self._call(Call("POST", "/namespaces", json=body), m.Namespace.from_json)

    @endpoint
    def preview_calendar(
        self,
        spec: Mapping[str, Any],
        *,
        after: datetime | str | None = None,
        count: int = 10,
        jitter_seconds: int | None = None,
        schedule_id: str | None = None,
    ) -> list[m.PreviewOccurrence]:
        """The due times of `spec`'s next occurrences; with `schedule_id`, what that schedule
        fires once saved with it (its own jitter, from its cursor while the spec fires alike)."""
        body = _body(
            spec=dict(spec),
            after=None if after is None else instant(after),
            count=count,
            jitter_seconds=jitter_seconds,
            schedule_id=schedule_id,
        )
        call = Call("POST", self._ns("calendar", "preview"), json=body)
        return self._call(
            call, lambda d: [m.PreviewOccurrence.from_json(o) for o in d["occurrences"]]
        )

    @endpoint
    def tick(self, *, work: bool = False) -> m.TickResult:
        """Run one tick now (superuser)."""
        return self._call(Call("POST", "/admin/tick", json={"work": work}), m.TickResult.from_json)

    @endpoint
    def set_clock(self, now: datetime | str, *, tick: bool = False, work: bool = False) -> Any:
        """Move a manual clock (superuser; the server must run with the manual clock). With
        `tick`, the tick that follows answers as `tick()` does (a `TickResult`); else the
        answer is `{"now": …}`."""
        body = {"now": instant(now), "tick": tick, "work": work}
        parse = m.TickResult.from_json if tick else dict
        return self._call(Call("POST", "/admin/clock", json=body), parse)

    # --- schedules -----------------------------------------------------------------------------

    @endpoint
    def save_schedule(self, body: Mapping[str, Any], revision: int | None = None) -> m.Schedule:
        """Create a schedule, or replace one at `revision` (sent as If-Match)."""
        call = Call("POST", self._ns("schedules"), json=dict(body), headers=if_match(revision))
        return self._call(call, m.Schedule.from_json)

    @endpoint
    def get_schedule(self, schedule_id: str, *, upcoming: int | None = None) -> m.Schedule:
        call = Call("GET", self._ns("schedules", schedule_id), _params(upcoming=upcoming))
        return self._call(call, m.Schedule.from_json)

    @paged
    def list_schedules(
        self,
        *,
        status: str | None = None,
        labels: Labels | None = None,
        q: str | None = None,
        include_deleted: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[m.Schedule]:
        """Every schedule matching the filters, newest first, page after page."""
        params = _params(
            status=status,
            label=_pairs(labels),
            q=q,
            include_deleted=include_deleted or None,
            limit=limit,
            cursor=cursor,
        )
        return self._walk(Call("GET", self._ns("schedules"), params), m.Schedule.from_json)

    @endpoint
    def update_schedule(
        self, schedule_id: str, patch: Mapping[str, Any], revision: int
    ) -> m.Schedule:
        """Merge-patch part of a schedule's configuration (null removes a field)."""
        path = self._ns("schedules", schedule_id)
        call = Call("PATCH", path, json=dict(patch), headers=if_match(revision))
        return self._call(call, m.Schedule.from_json)

    @endpoint
    def _change(self, verb: str, schedule_id: str, revision: int, reason: str | None) -> m.Schedule:
        path = self._ns("schedules", schedule_id, verb)
        call = Call("POST", path, json=_body(reason=reason), headers=if_match(revision))
        return self._call(call, m.Schedule.from_json)

    @endpoint
    def pause_schedule(
        self, schedule_id: str, revision: int, reason: str | None = None
    ) -> m.Schedule:
        return self._change("pause", schedule_id, revision, reason)

    @endpoint
    def resume_schedule(
        self, schedule_id: str, revision: int, reason: str | None = None
    ) -> m.Schedule:
        return self._change("resume", schedule_id, revision, reason)

    @endpoint
    def disable_schedule(
        self, schedule_id: str, revision: int, reason: str | None = None
    ) -> m.Schedule:
        return self._change("disable", schedule_id, revision, reason)

    @endpoint
    def enable_schedule(
        self, schedule_id: str, revision: int, reason: str | None = None
    ) -> m.Schedule:
        return self._change("enable", schedule_id, revision, reason)

    @endpoint
    def delete_schedule(
        self, schedule_id: str, revision: int, reason: str | None = None
    ) -> m.Schedule:
        return self._change("delete", schedule_id, revision, reason)

    @endpoint
    def trigger_schedule(
        self, schedule_id: str, *, overlap_policy: str | None = None, reason: str | None = None
    ) -> m.TriggerResult:
        body = _body(overlap_policy=overlap_policy, reason=reason)
        call = Call("POST", self._ns("schedules", schedule_id, "trigger"), json=body)
        return self._call(call, m.TriggerResult.from_json)

    @endpoint
    def backfill_once(
        self,
        schedule_id: str,
        from_: datetime | str,
        to: datetime | str,
        *,
        overlap_policy: str | None = None,
        reason: str | None = None,
    ) -> m.BackfillResult:
        """One backfill request: at most 1000 occurrences (else 422 BACKFILL_TOO_LARGE)."""
        body = _body(overlap_policy=overlap_policy, reason=reason)
        body.update({"from": instant(from_), "to": instant(to)})
        call = Call("POST", self._ns("schedules", schedule_id, "backfill"), json=body)
        return self._call(call, m.BackfillResult.from_json)

    @paged
    def list_occurrences(
        self, schedule_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[m.Occurrence]:
        """The occurrence ledger, newest first, page after page."""
        params = _params(limit=limit, cursor=cursor)
        call = Call("GET", self._ns("schedules", schedule_id, "occurrences"), params)
        return self._walk(call, m.Occurrence.from_json)

    @endpoint
    def get_schedule_history(
        self, schedule_id: str, *, limit: int | None = None, after_sequence: int | None = None
    ) -> m.ScheduleHistoryPage:
        """One page of the schedule's audit stream (`limit` 1-500, default 100)."""
        params = _params(limit=limit, after_sequence=after_sequence)
        call = Call("GET", self._ns("schedules", schedule_id, "history"), params)
        return self._call(call, m.ScheduleHistoryPage.from_json)

    @paged
    def iter_schedule_history(
        self, schedule_id: str, *, limit: int | None = None, after_sequence: int | None = None
    ) -> Iterator[m.ScheduleHistoryEvent]:
        """Every event of the audit stream after `after_sequence`, in sequence order."""
        params = _params(limit=limit, after_sequence=after_sequence)
        call = Call("GET", self._ns("schedules", schedule_id, "history"), params)
        return self._walk_history(call, m.ScheduleHistoryEvent.from_json)

    @endpoint
    def simulate_schedule(
        self,
        schedule_id: str,
        from_: datetime | str,
        to: datetime | str,
        run_duration: str | None = None,
    ) -> m.Simulation:
        """What the stored schedule would do over [from_, to): computed, nothing written."""
        body = _window(from_, to, run_duration)
        call = Call("POST", self._ns("schedules", schedule_id, "simulate"), json=body)
        return self._call(call, m.Simulation.from_json)

    @endpoint
    def simulate_save(
        self,
        body: Mapping[str, Any],
        from_: datetime | str,
        to: datetime | str,
        run_duration: str | None = None,
    ) -> m.Simulation:
        """What saving `body` would do over [from_, to): checked as a save is, nothing written."""
        window = _window(from_, to, run_duration)
        call = Call("POST", self._ns("schedules", "simulate"), json=dict(body) | window)
        return self._call(call, m.Simulation.from_json)
