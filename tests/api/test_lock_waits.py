"""A request kept waiting on a lock answers 503 BACKEND_BUSY (which clients retry) well inside
the clients' 30 s timeout: it waited for as long as the lock was held, the client gave up
("no answer: it may have been done") and the change landed after it had."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.db import make_engine


def _behind_the_lock(send: Any) -> tuple[Any, float]:
    """`send()` in a thread while the lock is held; its answer and how long it took. The lock
    is released after 25 s at most, so a request that would wait for ever fails the test."""
    answer: list[Any] = []
    began = time.monotonic()
    thread = threading.Thread(target=lambda: answer.append(send()), daemon=True)
    thread.start()
    thread.join(timeout=25)
    return answer, time.monotonic() - began


def test_a_request_behind_a_held_lock_answers_backend_busy_before_the_client_gives_up(
    app, admin_api, db_url, backend
):
    if backend == "sqlite":
        holder = sqlite3.connect(make_url(db_url).database, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        answer, waited = _behind_the_lock(
            lambda: admin_api.post("/namespaces", json={"name": "made-while-locked"})
        )
        holder.execute("ROLLBACK")
        holder.close()
    else:
        owner = make_engine(os.environ["ALMANAC_MIGRATION_DATABASE_URL"])
        with owner.connect() as holder:
            holder.execute(text("LOCK TABLE schedules IN ACCESS EXCLUSIVE MODE"))
            answer, waited = _behind_the_lock(lambda: admin_api.get("/schedules"))
            holder.rollback()
        owner.dispose()
    assert answer, f"no answer after {waited:.1f} s"
    response = answer[0]
    assert response.status_code == 503, response.get_json()
    assert response.get_json()["error"]["code"] == "BACKEND_BUSY"
    assert waited < 20, waited
    # Nothing was written, and the same request goes through once the lock is gone.
    names = [n["name"] for n in admin_api.get("/namespaces").get_json()["items"]]
    assert "made-while-locked" not in names
    assert admin_api.get("/schedules").status_code == 200
    assert admin_api.post("/namespaces", json={"name": "made-after"}).status_code == 201
