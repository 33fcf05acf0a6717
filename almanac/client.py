"""The synchronous SDK: `Client` and the `ScheduleHandle` it hands out."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from almanac import models as m
from almanac.backfill import PREVIEW_PAGE, RangeSplitter, ran_out
from almanac.errors import AlmanacError, NotFound
from almanac.run_operations import RunOperations
from almanac.transport import Call, SyncTransport, page_body, parsed

T = TypeVar("T")
Progress = Callable[[float], None]


def replace_param(params: list[tuple[str, str]], name: str, value: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in params if k != name] + [(name, str(value))]


class Pager(Iterator[T]):
    """Every item of a paged list, fetched page by page as it is iterated.

    `page()` fetches only the first page and answers the API's body unchanged (its items
    checked as typed results are).
    """

    def __init__(
        self, transport: SyncTransport, call: Call, parse: Callable[[Any], T], *, history: bool
    ) -> None:
        self.transport, self.call, self.parse, self.history = transport, call, parse, history
        self._items: Iterator[T] | None = None

    def page(self) -> dict[str, Any]:
        body = page_body(self.transport.send(self.call), self._key, self.call)
        for item in body[self._key]:
            parsed(self.parse, item, self.call)  # checked as a typed result would be
        return body

    @property
    def _key(self) -> str:
        return "events" if self.history else "items"

    def __iter__(self) -> Pager[T]:
        return self

    def __next__(self) -> T:
        if self._items is None:
            self._items = self._walk()
        return next(self._items)

    def _walk(self) -> Iterator[T]:
        for body in self.bodies():
            for item in body.get(self._key, []):
                yield parsed(self.parse, item, self.call)

    def raw(self) -> Iterator[dict[str, Any]]:
        """Every item as the API sent it: for streaming output. Each is checked as a typed
        result would be (an item without the API's shape is BAD_RESPONSE), then handed on."""
        for body in self.bodies():
            for item in body.get(self._key, []):
                parsed(self.parse, item, self.call)
                yield item

    def bodies(self) -> Iterator[dict[str, Any]]:
        """Every page's body in order.

        The next page is requested as soon as this one arrives, while the caller works through
        it: the server's time and the caller's overlap, which roughly doubles the pace of a long
        walk. At most one page is fetched that the caller may not use.
        """
        call = self.call
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="almanac-page") as pool:
            params = list(call.params)
            pending: Future[Any] | None = pool.submit(
                self.transport.send, Call(call.method, call.path, params)
            )
            while pending is not None:
                body = page_body(pending.result(), self._key, call)
                next_params = self._next_params(body, params)
                pending = None
                if next_params is not None:
                    params = next_params
                    pending = pool.submit(self.transport.send, Call(call.method, call.path, params))
                yield body

    def _next_params(
        self, body: dict[str, Any], params: list[tuple[str, str]]
    ) -> list[tuple[str, str]] | None:
        cursor = body.get("next_cursor")
        if cursor is None or cursor == "" or (self.history and not body.get("has_more")):
            return None
        return replace_param(params, "after_sequence" if self.history else "cursor", cursor)


class Client(RunOperations):
    """A blocking client of one Almanac server, bound to one namespace.

    >>> client = Client("http://127.0.0.1:8000", token, namespace="default")
    >>> for event in client.iter_schedule_history("daily-invoice-sync"): ...
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        namespace: str = "default",
        *,
        timeout: float = 30,
        retries: int = 3,
        source: str = "sdk",
    ) -> None:
        self.url = url
        self.namespace = namespace
        self._transport = SyncTransport(url, token, timeout, retries, source)

    def __repr__(self) -> str:  # never the token
        return f"Client(url={self.url!r}, namespace={self.namespace!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    def _call(self, call: Call, parse: Callable[[Any], T]) -> T:
        return parsed(parse, self._transport.send(call), call)

    def _walk(self, call: Call, parse: Callable[[Any], T]) -> Pager[T]:
        return Pager(self._transport, call, parse, history=False)

    def _walk_history(self, call: Call, parse: Callable[[Any], T]) -> Pager[T]:
        return Pager(self._transport, call, parse, history=True)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any API call under /api/v1 (retries and typed errors included): the raw JSON body.

        `params=`, `json=` and `headers=` as httpx takes them; a short route (`/runs`) is
        sent in the client's namespace (`X-Namespace`) unless `headers` names another."""
        call = self._request_call(
            method, path, kwargs.get("params"), kwargs.get("json"), kwargs.get("headers")
        )
        return self._transport.send(call)

    def backfill_schedule(
        self,
        schedule_id: str,
        from_: datetime | str,
        to: datetime | str,
        *,
        overlap_policy: str | None = None,
        reason: str | None = None,
        progress: Progress | None = None,
    ) -> m.BackfillResult:
        """Backfill [from_, to) in as many requests as the 1000-occurrence limit needs."""
        splitter = RangeSplitter(from_, to)
        while (part := splitter.next_part()) is not None:
            try:
                result = self.backfill_once(
                    schedule_id, part[0], part[1], overlap_policy=overlap_policy, reason=reason
                )
            except AlmanacError as exc:
                exhausted = splitter.may_have_run_out(exc) and self._skip_rest(
                    schedule_id, splitter
                )
                if not exhausted:
                    splitter.refused(exc)
                    continue
            else:
                splitter.accepted(result.raw)
            if progress is not None:
                progress(splitter.fraction)
        return splitter.summary()

    def _skip_rest(self, schedule_id: str, splitter: RangeSplitter) -> bool:
        """If the schedule ran out of runs, report every occurrence left as skipped (True)."""
        schedule = self.get_schedule(schedule_id)
        if not ran_out(schedule):
            return False
        rest = splitter.rest()
        while rest.after is not None:
            rest.add(self.preview_calendar(schedule.spec, after=rest.after, count=PREVIEW_PAGE))
        splitter.ran_out(rest)
        return True

    def find_incident(self, incident_id: str | int) -> m.Incident:
        """The namespace's incident with this id (to learn its run), or NotFound."""
        for incident in self.list_incidents():
            if str(incident.id) == str(incident_id):
                return incident
        raise NotFound("NOT_FOUND", f"no incident {incident_id} in {self.namespace!r}", {}, 404)

    def schedule(self, schedule_id: str, revision: int | None = None) -> ScheduleHandle:
        """A handle on one schedule that remembers the revision it last saw."""
        return ScheduleHandle(self, schedule_id, revision)


class ScheduleHandle:
    """One schedule; changes send the revision last read (If-Match) and keep the new one."""

    def __init__(self, client: Client, schedule_id: str, revision: int | None = None) -> None:
        self.client = client
        self.id = schedule_id
        self.revision = revision

    def __repr__(self) -> str:
        return f"ScheduleHandle({self.id!r}, revision={self.revision})"

    def describe(self) -> m.Schedule:
        return self._keep(self.client.get_schedule(self.id))

    def history(
        self, *, limit: int | None = None, after_sequence: int | None = None
    ) -> m.ScheduleHistoryPage:
        return self.client.get_schedule_history(self.id, limit=limit, after_sequence=after_sequence)

    def iter_history(
        self, *, limit: int | None = None, after_sequence: int | None = None
    ) -> Iterator[m.ScheduleHistoryEvent]:
        return self.client.iter_schedule_history(
            self.id, limit=limit, after_sequence=after_sequence
        )

    def _current(self) -> int:
        if self.revision is None:
            self.describe()
        assert self.revision is not None
        return self.revision

    def _keep(self, schedule: m.Schedule) -> m.Schedule:
        self.revision = schedule.revision
        return schedule

    def update(self, patch: Mapping[str, Any]) -> m.Schedule:
        return self._keep(self.client.update_schedule(self.id, patch, self._current()))

    def pause(self, reason: str | None = None) -> m.Schedule:
        return self._keep(self.client.pause_schedule(self.id, self._current(), reason))

    def resume(self, reason: str | None = None) -> m.Schedule:
        return self._keep(self.client.resume_schedule(self.id, self._current(), reason))

    def delete(self, reason: str | None = None) -> m.Schedule:
        return self._keep(self.client.delete_schedule(self.id, self._current(), reason))

    def trigger(self, overlap_policy: str | None = None) -> m.TriggerResult:
        return self.client.trigger_schedule(self.id, overlap_policy=overlap_policy)

    def backfill(
        self, from_: datetime | str, to: datetime | str, overlap_policy: str | None = None
    ) -> m.BackfillResult:
        return self.client.backfill_schedule(self.id, from_, to, overlap_policy=overlap_policy)

    def simulate(
        self, from_: datetime | str, to: datetime | str, run_duration: str | None = None
    ) -> m.Simulation:
        return self.client.simulate_schedule(self.id, from_, to, run_duration)
