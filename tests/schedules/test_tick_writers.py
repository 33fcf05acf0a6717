"""On PostgreSQL a tick writes two pages at once, each on its own connection, once a burst has
outgrown its first pages (`SOLO_PAGES`, written one at a time): every schedule still fires once,
and a page that fails leaves its schedules due while the other commits. Set to
`TICK_WRITERS = 1`, it writes one page at a time."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.schedules.tick import due
from app.ticker.tick import run_tick

pytestmark = pytest.mark.parametrize("backend", ["postgres"])


class Writers:
    """Holds each page's writes (on the writer threads) until `together` pages are being
    written at once, or a few seconds pass; records how many were at most. With `once`, a page
    written after that has happened is not held (so a slow machine does not stretch the tick
    past its budget waiting for a partner the last page will never get)."""

    def __init__(
        self, together: int, fail: str | None = None, timeout: float = 5, once: bool = False
    ) -> None:
        self.together, self.fail, self.timeout, self.once = together, fail, timeout, once
        self.active = self.most = 0
        # Each page (by its first schedule) -> the most pages written while it was.
        self.beside: dict[str, int] = {}
        self.writing: set[str] = set()
        self.changed = threading.Condition()
        self.real = due._flush

    def flush(self, page: Any) -> None:
        name = page.fired[0].schedule_id
        with self.changed:
            self.active += 1
            self.most = max(self.most, self.active)
            self.writing.add(name)
            for each in self.writing:
                self.beside[each] = max(self.beside.get(each, 0), len(self.writing))
            self.changed.notify_all()
            self.changed.wait_for(self._may_write, timeout=self.timeout)
        try:
            if self.fail in {row.schedule_id for row in page.fired}:
                raise RuntimeError("the database refused this page")
            self.real(page)
        finally:
            with self.changed:
                self.active -= 1
                self.writing.discard(name)

    def _may_write(self) -> bool:
        return self.active >= self.together or (self.once and self.most >= self.together)


def _due_schedules(h, count: int) -> None:
    activation = h.workflow()
    for index in range(count):
        h.create(f"s{index}", cron="*/10 * * * *", activation_id=activation)


def _fire_in_pages_of_two(h, monkeypatch, writers: Writers, count: int) -> None:
    """Fire `count` due schedules in pages of two through `writers`: each fires once, and
    the tick reports them in page order."""
    monkeypatch.setattr(due, "PAGE_SIZE", 2)
    monkeypatch.setattr(due, "_flush", writers.flush)
    _due_schedules(h, count)
    rows = h.tick("12:10")
    assert [(r["schedule_id"], r["outcome"]) for r in rows] == [
        (f"s{i}", "triggered") for i in range(count)
    ]
    assert sorted(run.schedule_id for run in h.runs()) == sorted(f"s{i}" for i in range(count))


def test_by_default_a_burst_s_first_pages_are_written_alone_and_the_rest_two_at_a_time(
    h, monkeypatch
):
    assert due.SOLO_PAGES == 2
    # Each page waits a moment for a second one to be written beside it (until two have been).
    writers = Writers(together=2, timeout=0.3, once=True)
    _fire_in_pages_of_two(h, monkeypatch, writers, 10)
    # The first page was written alone; the second one handed over is in flight when the
    # third may join it.
    assert writers.beside["s0"] == 1
    assert writers.beside["s4"] == 2
    assert writers.most == 2


def test_set_to_one_writer_a_tick_writes_one_page_at_a_time(h, monkeypatch):
    monkeypatch.setitem(h.app.config, "TICK_WRITERS", 1)
    # Each page waits a moment for a second one to be written beside it; none comes.
    writers = Writers(together=2, timeout=0.2)
    _fire_in_pages_of_two(h, monkeypatch, writers, 12)
    assert writers.most == 1
    assert set(writers.beside.values()) == {1}


def test_two_pages_are_written_at_once_and_each_schedule_fires_once(h, monkeypatch):
    monkeypatch.setattr(due, "SOLO_PAGES", 0)
    writers = Writers(together=2, once=True)
    _fire_in_pages_of_two(h, monkeypatch, writers, 8)
    assert writers.most == 2
    for index in range(8):
        assert [o["kind"] for o in h.ledger(f"s{index}")] == ["started"]
        assert h.read(f"s{index}")["next_fire_at"] == "2026-01-05T12:20:00Z"


def test_a_failed_page_stays_due_while_the_page_written_beside_it_commits(h, monkeypatch):
    monkeypatch.setattr(due, "PAGE_SIZE", 2)
    monkeypatch.setattr(due, "SOLO_PAGES", 0)
    # The first page (s0, s1) fails while the second (s2, s3) is being written beside it.
    writers = Writers(together=2, fail="s0")
    monkeypatch.setattr(due, "_flush", writers.flush)
    _due_schedules(h, 6)
    h.set_clock("12:10")
    result = run_tick(h.app)
    assert [f["phase"] for f in result.failures] == ["fire_due_schedules"]
    assert "the database refused this page" in result.failures[0]["cause"]
    # The page beside it committed; the failed page and the one decided meanwhile did not.
    assert sorted(run.schedule_id for run in h.runs()) == ["s2", "s3"]
    for name in ("s0", "s1", "s4", "s5"):
        assert h.ledger(name) == []
        assert h.read(name)["next_fire_at"] == "2026-01-05T12:10:00Z"
    # The next tick fires what is still due, once.
    monkeypatch.setattr(due, "_flush", writers.real)
    rows = h.tick("12:10:05")
    assert sorted(r["schedule_id"] for r in rows if r["outcome"] == "triggered") == [
        "s0",
        "s1",
        "s4",
        "s5",
    ]
    for index in range(6):
        assert [o["kind"] for o in h.ledger(f"s{index}")] == ["started"]
    assert len(h.runs()) == 6
