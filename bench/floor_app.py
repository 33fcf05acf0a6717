"""The least a schedule save can cost on this stack: an upper bound for `save_bench.py`.

`save_bench.py` serves this app as it serves Almanac (one gunicorn worker, 8 threads) on the
database Almanac just saved into, and saves the same bodies to it. Each save does only the
database work a real save cannot avoid, in this stack's cheapest way (Flask, SQLAlchemy Core
with the statements written out, the same engines and pool):

- one statement finds the token's user, the namespace and the user's role there (and, on
  PostgreSQL, binds the row-security scope, as Almanac does);
- one statement finds the workflow's newest ready activation;
- one write transaction inserts the schedule, its first revision and its creation event;
- the answer is a small JSON object.

It skips everything else a save must do: validating the body and the workflow's input, the
calendar (the next due time is a constant), history payload checks, If-Match, the full
resource in the answer. So no implementation of a save on this stack can be faster than this
on the same machine; Almanac's rate divided by this one is how much of the possible it reaches.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, request

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.db import make_engine  # noqa: E402
from app.db.rls import ALL_SETTING, SETTING  # noqa: E402

engine = make_engine(os.environ["ALMANAC_DATABASE_URL"])
POSTGRES = engine.dialect.name == "postgresql"
MARK = "%s" if POSTGRES else "?"

_CALLER = f"""
SELECT u.id, n.id, m.role{{scope}}
FROM api_tokens t JOIN users u ON u.id = t.user_id
LEFT JOIN namespaces n ON n.name = {MARK}
LEFT JOIN memberships m ON m.user_id = u.id AND m.namespace_id = n.id
WHERE t.token_sha256 = {MARK} AND t.revoked_at IS NULL AND u.disabled_at IS NULL
"""
_SCOPE = (
    f", set_config('{SETTING}', coalesce(CAST((SELECT array_agg(namespace_id)"
    " FROM memberships WHERE user_id = u.id) AS text), ''), true),"
    f" set_config('{ALL_SETTING}', CASE WHEN u.is_superuser THEN 'on' ELSE 'off' END, true)"
)
CALLER = _CALLER.format(scope=_SCOPE if POSTGRES else "")
TARGET = f"""
SELECT w.name FROM activations a JOIN workflows w ON w.id = a.workflow_id
WHERE w.namespace_id = {MARK} AND w.name = {MARK} AND a.status = 'ready'
ORDER BY a.created_at DESC, a.id DESC LIMIT 1
"""
SCHEDULE_COLUMNS = (
    "uid, namespace_id, schedule_id, revision, status, principal_id, workflow_name, spec, action,"
    " overlap_policy, missed_policy, jitter_seconds, labels, memo, search_attributes, cursor_at,"
    " next_occurrence, next_fire_at, fires_count, skipped_trigger_count, buffered_count,"
    " history_sequence, created_at, updated_at"
)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({', '.join([MARK] * 24)})"
    " ON CONFLICT (namespace_id, schedule_id) DO NOTHING RETURNING id"
)
INSERT_REVISION = (
    "INSERT INTO schedule_revisions (schedule_pk, revision, config, principal_id, created_at)"
    f" VALUES ({', '.join([MARK] * 5)})"
)
INSERT_EVENT = (
    "INSERT INTO schedule_history_events (schedule_pk, sequence, event_type, payload,"
    f" recorded_at) VALUES ({', '.join([MARK] * 5)})"
)
NEXT = datetime(2030, 1, 1, tzinfo=UTC)

app = Flask(__name__)


def _stamp(value: datetime) -> Any:
    # SQLite stores Almanac's instants as naive UTC text; psycopg takes the aware datetime.
    naive = value.replace(tzinfo=None)
    return value if POSTGRES else naive.isoformat(sep=" ", timespec="microseconds")


@app.post("/api/v1/schedules")
def save() -> Any:
    token = request.headers.get("Authorization", "").partition(" ")[2]
    sha = hashlib.sha256(token.encode()).hexdigest()
    body = request.get_json()
    now = datetime.now(UTC)
    with engine.connect() as conn:
        # One transaction: on SQLite it takes the write lock at once (reads go on beside it).
        conn.execution_options(sqlite_immediate=True)
        caller = conn.exec_driver_sql(CALLER, ("default", sha)).first()
        if caller is None or caller[1] is None or caller[2] is None:
            return jsonify({"error": "unauthenticated"}), 401
        user_id, namespace_id = caller[0], caller[1]
        workflow = body["action"]["workflow"]
        target = conn.exec_driver_sql(TARGET, (namespace_id, workflow)).first()
        if target is None:
            return jsonify({"error": "no ready activation"}), 422
        # Stored as Almanac stores them, so the rows are as large as a real save's.
        spec = {"cron_expressions": [body["cron"]], "intervals": [], "timezone": "UTC"}
        spec |= {"start_at": None, "end_at": None}
        action = {"workflow": workflow, "activation_id": None, "input": {}, "queue": None}
        action |= {"execution_timeout_seconds": None, "run_timeout_seconds": None}
        stamp = _stamp(now)
        row = (
            str(uuid.uuid4()), namespace_id, body["id"], 1, "active", user_id, target[0],
            json.dumps(spec), json.dumps(action), "skip", "skip", 0, "{}", "{}", "{}", stamp,
            _stamp(NEXT), _stamp(NEXT), 0, 0, 0, 1, stamp, stamp,
        )  # fmt: skip
        pk = conn.exec_driver_sql(INSERT_SCHEDULE, row).scalar()
        if pk is None:
            conn.rollback()
            return jsonify({"error": "taken"}), 409
        config = {"spec": spec, "action": action, "schedule_id": body["id"], "status": "active"}
        conn.exec_driver_sql(INSERT_REVISION, (pk, 1, json.dumps(config), user_id, stamp))
        payload = {"spec": spec, "action": action, "next_fire_at": "2030-01-01T00:00:00Z"}
        payload["command_context"] = {"actor": "admin", "request_id": str(uuid.uuid4())}
        event = (pk, 1, "ScheduleCreated", json.dumps(payload), stamp)
        conn.exec_driver_sql(INSERT_EVENT, event)
        conn.commit()
    return jsonify({"schedule_id": body["id"], "revision": 1, "status": "active"}), 201
