"""The asyncio SDK: `AsyncClient` (same methods as `Client`, as coroutines) and its handle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from almanac import models as m
from almanac.backfill import PREVIEW_PAGE, RangeSplitter, ran_out
from almanac.client import Progress, replace_param
from almanac.errors import AlmanacError, NotFound
from almanac.run_operations import RunOperations
from almanac.transport import (
    CLOSES_AFTER,
    Call,
    connection_error,
    decode,
    http_options,
    page_body,
    parsed,
    request_options,
    resend,
    retry_delay,
    retryable,
)

T = TypeVar("T")


class AsyncTransport:
    def __init__(self, url: str, token: str | None, timeout: float, retries: int, source: str):
        self.url = url
        self.retries = retries
        self.options = http_options(url, token, timeout, source)
        self.http = httpx.AsyncClient(**self.options)

    async def send(self, call: Call) -> Any:
        attempt, resent = 0, False
        while True:
            try:
                response = await self.http.request(call.method, call.path, **request_options(call))
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                if resend(call, exc, resent):
                    resent = True
                    continue
                raise connection_error(exc, self.url, call) from exc
            if response.status_code in CLOSES_AFTER:
                await self.http.aclose()
                self.http = httpx.AsyncClient(**self.options)
            if attempt < self.retries and retryable(call, response):
                await asyncio.sleep(retry_delay(response, attempt))
                attempt += 1
                continue
            return decode(response)

    async def close(self) -> None:
        await self.http.aclose()


class AsyncPager(AsyncIterator[T]):
    """Every item of a paged list as an async iterator.

    `await page()` gets the first page; `raw()` iterates the items as the API sent them.
    """

    def __init__(
        self, transport: AsyncTransport, call: Call, parse: Callable[[Any], T], *, history: bool
    ) -> None:
        self.transport, self.call, self.parse, self.history = transport, call, parse, history
        self._items: AsyncIterator[T] | None = None

    async def page(self) -> dict[str, Any]:
        body = page_body(await self.transport.send(self.call), self._key, self.call)
        for item in body[self._key]:
            parsed(self.parse, item, self.call)  # checked as a typed result would be
        return body

    @property
    def _key(self) -> str:
        return "events" if self.history else "items"

    def __aiter__(self) -> AsyncPager[T]:
        return self

    async def __anext__(self) -> T:
        if self._items is None:
            self._items = self._walk()
        return await self._items.__anext__()

    async def _walk(self) -> AsyncIterator[T]:
        async for body in self.bodies():
            for item in body.get(self._key, []):
                yield parsed(self.parse, item, self.call)

    async def raw(self) -> AsyncIterator[dict[str, Any]]:
        """Every item as the API sent it: for streaming output. Each is checked as a typed
        result would be (an item without the API's shape is BAD_RESPONSE), then handed on."""
        async for body in self.bodies():
            for item in body.get(self._key, []):
                parsed(self.parse, item, self.call)
                yield item

    async def bodies(self) -> AsyncIterator[dict[str, Any]]:
        """Every page's body in order."""
        call, params = self.call, list(self.call.params)
        cursor_param = "after_sequence" if self.history else "cursor"
        while True:
            body = await self.transport.send(Call(call.method, call.path, params, call.json))
            yield page_body(body, self._key, call)
            cursor = body.get("next_cursor")
            if cursor is None or cursor == "" or (self.history and not body.get("has_more")):
                return
            params = replace_param(params, cursor_param, cursor)


class AsyncClient(RunOperations):
    """An asyncio client: `async with AsyncClient(url, token) as client: ...`.

    Methods that answer one response are coroutines; methods that walk pages
    (`list_schedules`, `iter_schedule_history`, ...) return async iterators.
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
        self._transport = AsyncTransport(url, token, timeout, retries, source)

    def __repr__(self) -> str:  # never the token
        return f"AsyncClient(url={self.url!r}, namespace={self.namespace!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections (`await client.close()`, as `client.close()` on `Client`)."""
        await self._transport.close()

    async def aclose(self) -> None:
        await self.close()

    async def _call(self, call: Call, parse: Callable[[Any], T]) -> T:
        return parsed(parse, await self._transport.send(call), call)

    def _walk(self, call: Call, parse: Callable[[Any], T]) -> AsyncPager[T]:
        return AsyncPager(self._transport, call, parse, history=False)

    def _walk_history(self, call: Call, parse: Callable[[Any], T]) -> AsyncPager[T]:
        return AsyncPager(self._transport, call, parse, history=True)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any API call under /api/v1 (retries and typed errors included): the raw JSON body.

        `params=`, `json=` and `headers=` as httpx takes them; a short route (`/runs`) is
        sent in the client's namespace (`X-Namespace`) unless `headers` names another."""
        call = self._request_call(
            method, path, kwargs.get("params"), kwargs.get("json"), kwargs.get("headers")
        )
        return await self._transport.send(call)

    async def backfill_schedule(
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
                result = await self.backfill_once(
                    schedule_id, part[0], part[1], overlap_policy=overlap_policy, reason=reason
                )
            except AlmanacError as exc:
                exhausted = splitter.may_have_run_out(exc) and await self._skip_rest(
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

    async def _skip_rest(self, schedule_id: str, splitter: RangeSplitter) -> bool:
        """If the schedule ran out of runs, report every occurrence left as skipped (True)."""
        schedule = await self.get_schedule(schedule_id)
        if not ran_out(schedule):
            return False
        rest = splitter.rest()
        while rest.after is not None:
            rest.add(
                await self.preview_calendar(schedule.spec, after=rest.after, count=PREVIEW_PAGE)
            )
        splitter.ran_out(rest)
        return True

    async def find_incident(self, incident_id: str | int) -> m.Incident:
        async for incident in self.list_incidents():
            if str(incident.id) == str(incident_id):
                return incident
        raise NotFound("NOT_FOUND", f"no incident {incident_id} in {self.namespace!r}", {}, 404)

    def schedule(self, schedule_id: str, revision: int | None = None) -> AsyncScheduleHandle:
        return AsyncScheduleHandle(self, schedule_id, revision)


class AsyncScheduleHandle:
    """`ScheduleHandle` for `AsyncClient`: the same methods, awaited."""

    def __init__(self, client: AsyncClient, schedule_id: str, revision: int | None = None):
        self.client = client
        self.id = schedule_id
        self.revision = revision

    def __repr__(self) -> str:
        return f"AsyncScheduleHandle({self.id!r}, revision={self.revision})"

    async def describe(self) -> m.Schedule:
        return self._keep(await self.client.get_schedule(self.id))

    async def history(
        self, *, limit: int | None = None, after_sequence: int | None = None
    ) -> m.ScheduleHistoryPage:
        return await self.client.get_schedule_history(
            self.id, limit=limit, after_sequence=after_sequence
        )

    def iter_history(
        self, *, limit: int | None = None, after_sequence: int | None = None
    ) -> AsyncIterator[m.ScheduleHistoryEvent]:
        return self.client.iter_schedule_history(
            self.id, limit=limit, after_sequence=after_sequence
        )

    async def _current(self) -> int:
        if self.revision is None:
            await self.describe()
        assert self.revision is not None
        return self.revision

    def _keep(self, schedule: m.Schedule) -> m.Schedule:
        self.revision = schedule.revision
        return schedule

    async def update(self, patch: Mapping[str, Any]) -> m.Schedule:
        revision = await self._current()
        return self._keep(await self.client.update_schedule(self.id, patch, revision))

    async def pause(self, reason: str | None = None) -> m.Schedule:
        revision = await self._current()
        return self._keep(await self.client.pause_schedule(self.id, revision, reason))

    async def resume(self, reason: str | None = None) -> m.Schedule:
        revision = await self._current()
        return self._keep(await self.client.resume_schedule(self.id, revision, reason))

    async def delete(self, reason: str | None = None) -> m.Schedule:
        revision = await self._current()
        return self._keep(await self.client.delete_schedule(self.id, revision, reason))

    async def trigger(self, overlap_policy: str | None = None) -> m.TriggerResult:
        return await self.client.trigger_schedule(self.id, overlap_policy=overlap_policy)

    async def backfill(
        self, from_: datetime | str, to: datetime | str, overlap_policy: str | None = None
    ) -> m.BackfillResult:
        return await self.client.backfill_schedule(
            self.id, from_, to, overlap_policy=overlap_policy
        )

    async def simulate(
        self, from_: datetime | str, to: datetime | str, run_duration: str | None = None
    ) -> m.Simulation:
        return await self.client.simulate_schedule(self.id, from_, to, run_duration)
