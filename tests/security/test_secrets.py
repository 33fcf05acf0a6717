"""Secret inputs: encrypted at rest, `***` in every response and page, plaintext for actions,
and nowhere in the database file, its WAL, a pg_dump or the logs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.context import database
from app.db import Run, Schedule
from app.runs.actions import ActionContext, action
from tests.security.conftest import csrf_from, deploy, sign_in

API_SECRET = "hunter2-api-plaintext-7f3a"
FORM_SECRET = "swordfish-console-plaintext-91c2"
SCHEMA = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "x-secret": True, "minLength": 4},
        "password": {"type": "string", "writeOnly": True},
        "region": {"type": "string"},
    },
}
SEEN: list[dict[str, Any]] = []


@action("capture-secret")
def capture(ctx: ActionContext) -> Any:
    """Remember the input the action received, and echo it (history must still hide it)."""
    SEEN.append(dict(ctx.input))
    return {"echo": ctx.input, "note": f"used {ctx.input.get('token')}"}


STEPS = [{"id": "use", "type": "action", "action": "capture-secret"}]


def _everything_shown(api, run_id: str) -> str:
    parts = [
        api.get(f"/runs/{run_id}").get_data(as_text=True),
        api.get(f"/runs/{run_id}/history").get_data(as_text=True),
        api.get(f"/runs/{run_id}/replay").get_data(as_text=True),
        api.get("/runs").get_data(as_text=True),
    ]
    return "\n".join(parts)


def _database_bytes(app) -> bytes:
    url = make_url(app.config["DATABASE_URL"])
    if url.get_backend_name() == "sqlite":
        path = Path(url.database)
        return b"".join(
            Path(f"{path}{suffix}").read_bytes()
            for suffix in ("", "-wal", "-shm")
            if Path(f"{path}{suffix}").exists()
        )
    # Dump as the owner: the app login cannot read every table (nor bypass row security).
    owner = make_url(os.environ.get("ALMANAC_MIGRATION_DATABASE_URL") or str(url))
    dump = subprocess.run(
        [
            "pg_dump",
            "-h",
            owner.host or "127.0.0.1",
            "-U",
            owner.username or "postgres",
            url.database,
        ],
        capture_output=True,
        check=True,
    )
    return dump.stdout


def test_secret_written_through_api_and_console_is_hidden_everywhere(
    app, client, accounts, admin_api, caplog
):
    caplog.set_level(logging.DEBUG)
    SEEN.clear()
    assert deploy(admin_api, "pay", SCHEMA, STEPS).status_code == 201
    # API: a run with secrets.
    body = {
        "workflow": "pay",
        "run_id": "r1",
        "input": {"token": API_SECRET, "password": API_SECRET + "p", "region": "eu"},
    }
    started = admin_api.post("/runs", json=body)
    assert started.status_code == 201
    assert started.get_json()["input"] == {"token": "***", "password": "***", "region": "eu"}
    # A schema failure on a secret does not quote the value back.
    bad = admin_api.post("/runs", json={"workflow": "pay", "input": {"token": "abc"}})
    assert bad.status_code == 422 and "abc" not in bad.get_data(as_text=True)
    # Console: a schedule whose input holds a secret, saved through the form.
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    token = csrf_from(client.get("/ns/default/schedules/new"))
    form = {
        "csrf_token": token,
        "schedule_id": "nightly",
        "cron_expressions": "*/5 * * * *",
        "timezone": "UTC",
        "workflow": "pay",
        "input": json.dumps({"token": FORM_SECRET, "region": "us"}),
        "overlap_policy": "allow_all",
        "missed_policy": "skip",
    }
    saved = client.post("/ns/default/schedules/new", data=form)
    assert saved.status_code == 302, saved.get_data(as_text=True)[:2000]
    # Editing without retyping the secret (the form shows ***) keeps it.
    edit = client.get("/ns/default/schedules/nightly/edit")
    edit_html = edit.get_data(as_text=True)
    assert FORM_SECRET not in edit_html and "***" in edit_html
    form_again = form | {
        "csrf_token": csrf_from(edit),
        "input": '{"token": "***", "region": "us"}',
        "revision": "1",
    }
    resaved = client.post("/ns/default/schedules/nightly/edit", data=form_again)
    assert resaved.status_code == 302, resaved.get_data(as_text=True)[:2000]
    # Fire the schedule and run every step: actions see the plaintext.
    ticked = admin_api.post(
        "/admin/clock", json={"now": "2026-01-05T12:05:00Z", "tick": True, "work": True}
    )
    assert ticked.status_code == 200, ticked.get_json()
    assert {"token": API_SECRET, "password": API_SECRET + "p", "region": "eu"} in SEEN
    assert {"token": FORM_SECRET, "region": "us"} in SEEN
    scheduled = "schedule:nightly:20260105T120500Z"
    shown = "\n".join(
        [
            _everything_shown(admin_api, "r1"),
            _everything_shown(admin_api, scheduled),
            admin_api.get("/schedules/nightly").get_data(as_text=True),
            admin_api.get("/schedules/nightly/history").get_data(as_text=True),
            admin_api.get("/schedules").get_data(as_text=True),
            client.get("/ns/default/schedules/nightly").get_data(as_text=True),
            client.get("/ns/default/runs/r1").get_data(as_text=True),
            client.get(f"/ns/default/runs/{scheduled}").get_data(as_text=True),
            client.get(
                "/ns/default/schedules/nightly/history", headers={"HX-Request": "true"}
            ).get_data(as_text=True),
        ]
    )
    assert "***" in shown
    for secret in (API_SECRET, FORM_SECRET):
        assert secret not in shown
        assert secret not in caplog.text
    with database(app).session() as session:
        stored = session.scalar(select(Run.input).where(Run.run_id == "r1"))
        assert stored["token"].startswith("enc:v1:") and stored["region"] == "eu"
        action = session.scalar(select(Schedule.action).where(Schedule.schedule_id == "nightly"))
        assert action["input"]["token"].startswith("enc:v1:")
    dumped = _database_bytes(app)
    assert b"enc:v1:" in dumped
    for secret in (API_SECRET, FORM_SECRET):
        assert secret.encode() not in dumped


@action("keys-and-raise")
def keys_and_raise(ctx: ActionContext) -> Any:
    """Return the input's texts as dictionary keys, or raise quoting the input (Python repr)."""
    if ctx.input.get("raise"):
        raise RuntimeError(f"boom with input {ctx.input}")
    return {str(value): 1 for value in ctx.input.values()}


def test_object_and_array_secrets_are_hidden_in_what_actions_return_or_raise(app, admin_api):
    # The scrub compared a secret object's whole serialization and then walked the output leaf
    # by leaf, so an echoed object or array secret was stored and shown in plaintext.
    schema = {
        "type": "object",
        "properties": {
            "creds": {"type": "object", "x-secret": True},
            "tokens": {"type": "array", "x-secret": True},
            "pw": {"type": "string", "x-secret": True},
            "raise": {"type": "boolean"},
        },
    }
    secret_input = {
        "creds": {"user": "svc", "key": "obj-secret-5c1e", "n": 987654},
        "tokens": ["arr-secret-77aa", "arr-secret-88bb"],
        # Printed escaped by repr and JSON: a quote, a line break, non-ASCII letters.
        "pw": "key-secret-19fe'q\"\nß-ü",
    }
    steps = [
        {"id": "echo", "type": "action", "action": "echo"},
        {"id": "keys", "type": "action", "action": "keys-and-raise"},
    ]
    assert deploy(admin_api, "objsec", schema, steps).status_code == 201
    body = {"workflow": "objsec", "run_id": "o1", "input": secret_input}
    assert admin_api.post("/runs", json=body).status_code == 201
    raising = {"workflow": "objsec", "run_id": "o2", "input": secret_input | {"raise": True}}
    assert admin_api.post("/runs", json=raising).status_code == 201
    from app.ticker.tick import run_tick

    run_tick(app, work=True)
    assert admin_api.get("/runs/o1").get_json()["status"] == "completed"
    assert admin_api.get("/runs/o2").get_json()["status"] in ("failed", "suspended")
    shown = _everything_shown(admin_api, "o1") + _everything_shown(admin_api, "o2")
    dumped = _database_bytes(app)
    for secret in ("obj-secret-5c1e", "987654", "arr-secret-77aa", "arr-secret-88bb"):
        assert secret not in shown, secret
        assert secret.encode() not in dumped, secret
    assert "key-secret-19fe" not in shown and b"key-secret-19fe" not in dumped
    assert "19fe" not in json.dumps(admin_api.get("/runs/o2").get_json()["error"])
    history = admin_api.get("/runs/o1/history").get_json()["items"]
    (echoed,) = [e["payload"]["output"] for e in history if e["event_type"] == "step_completed"][:1]
    assert echoed["creds"] == "***" and echoed["tokens"] == "***" and echoed["pw"] == "***"


def test_a_schema_error_about_a_value_holding_secrets_does_not_quote_them(admin_api):
    # maxProperties quotes the whole object (Python's repr), secrets included.
    schema = {
        "type": "object",
        "maxProperties": 3,
        "properties": {
            "pw": {"type": "string", "x-secret": True},
            "nested": {
                "type": "object",
                "maxProperties": 1,
                "properties": {"key": {"type": "object", "writeOnly": True}},
            },
        },
    }
    assert deploy(admin_api, "quoted", schema, STEPS).status_code == 201
    cases = [
        {"pw": "quoted-secret-a1", "x": 1, "y": 2, "z": 3},
        {"pw": "p", "nested": {"key": {"deep": "quoted-secret-b2"}, "other": 1}},
    ]
    for value in cases:
        for path in ("/runs", "/schedules/simulate"):
            body = {"workflow": "quoted", "input": value}
            if path != "/runs":
                window = {"from": "2026-01-05T12:00:00Z", "to": "2026-01-05T13:00:00Z"}
                body |= {"cron": "0 * * * *"} | window
            refused = admin_api.post(path, json=body)
            text = refused.get_data(as_text=True)
            assert refused.status_code == 422, text
            assert "quoted-secret" not in text, text
            assert "has too many properties" in text and "'***'" in text


def test_a_null_input_is_quoted_as_null_not_as_hidden_text(admin_api):
    # A null held nothing to hide, yet was quoted '***', as if the caller had sent text.
    deploy(admin_api, "nullable", SCHEMA, STEPS)
    for value, quoted in ((None, "None"), ([None, True], "[None, '***']")):
        refused = admin_api.post("/runs", json={"workflow": "nullable", "input": value})
        assert refused.status_code == 422
        error = refused.get_json()["error"]
        assert error["message"] == f"input: {quoted} is not of type 'object'"
    assert admin_api.get("/runs").get_json()["items"] == []


def test_a_schedule_whose_secret_no_key_opens_can_still_be_edited_and_given_it_again(
    app, admin_api
):
    # Every save of such a schedule was a 500, even one sending the secret's new value.
    from cryptography.fernet import Fernet

    from app.runs import secrets
    from app.ticker.tick import run_tick

    deploy(admin_api, "pay", SCHEMA, STEPS)
    saved = dict(secrets._keyring)
    secrets.configure([Fernet.generate_key().decode()])
    try:
        body = {
            "id": "lost",
            "cron": "0 3 * * *",
            "workflow": "pay",
            "input": {"token": API_SECRET, "region": "eu"},
        }
        assert admin_api.post("/schedules", json=body).status_code == 201
        secrets.configure([Fernet.generate_key().decode()])  # the key is gone

        def patch(change: dict[str, Any]) -> Any:
            revision = admin_api.get("/schedules/lost").get_json()["revision"]
            return admin_api.request(
                "PATCH", "/schedules/lost", json=change, headers={"If-Match": str(revision)}
            )

        notes = patch({"notes": "key lost"})
        assert notes.status_code == 200, notes.get_json()
        # The input sent back as shown (the console's edit form does): left alone, kept.
        shown = patch({"input": {"token": "***", "region": "eu"}, "notes": "again"})
        assert shown.status_code == 200, shown.get_json()
        # Changed beside the lost secret: it must be given again.
        masked = patch({"input": {"token": "***", "region": "us"}})
        assert masked.status_code == 422
        (error,) = masked.get_json()["error"]["details"]["errors"]
        assert error["loc"] == ["input", "token"] and "send its value again" in error["msg"]
        again = patch({"input": {"token": "given-again-42ab", "region": "eu"}})
        assert again.status_code == 200, again.get_json()
        revision = admin_api.get("/schedules/lost").get_json()["revision"]
        fired = admin_api.post(
            "/schedules/lost/trigger", json={}, headers={"If-Match": str(revision)}
        )
        assert fired.status_code in (200, 201), fired.get_json()
        SEEN.clear()
        run_tick(app, work=True)
        assert {"token": "given-again-42ab", "region": "eu"} in SEEN
    finally:
        secrets._keyring.clear()
        secrets._keyring.update(saved)


def test_a_secret_mark_almanac_would_not_honour_is_refused_at_deploy(admin_api):
    # Marks are followed through `properties` only: one under $ref, items or allOf was
    # accepted and its value stored and shown in plaintext.
    refused = {
        "ref": (
            {
                "$defs": {"Secret": {"type": "string", "x-secret": True}},
                "properties": {"pw": {"$ref": "#/$defs/Secret"}},
            },
            ["input_schema", "$defs", "Secret"],
        ),
        "items": (
            {
                "properties": {
                    "accts": {"type": "array", "items": {"type": "string", "x-secret": True}}
                }
            },
            ["input_schema", "properties", "accts", "items"],
        ),
        "allof": (
            {"properties": {"all": {"allOf": [{"type": "string", "writeOnly": True}]}}},
            ["input_schema", "properties", "all", "allOf", 0],
        ),
        "root": ({"type": "string", "x-secret": True}, ["input_schema"]),
        # Entries named like the keywords that hold maps are still schemas.
        "defs-named-properties": (
            {
                "$defs": {"properties": {"type": "string", "x-secret": True}},
                "properties": {"pw": {"$ref": "#/$defs/properties"}},
            },
            ["input_schema", "$defs", "properties"],
        ),
        "defs-named-defs": (
            {
                "$defs": {"$defs": {"type": "string", "writeOnly": True}},
                "properties": {"pw": {"$ref": "#/$defs/$defs"}},
            },
            ["input_schema", "$defs", "$defs"],
        ),
        "pattern-named-properties": (
            {
                "properties": {
                    "cfg": {
                        "type": "object",
                        "patternProperties": {"properties": {"type": "string", "x-secret": True}},
                    }
                }
            },
            ["input_schema", "properties", "cfg", "patternProperties", "properties"],
        ),
    }
    for name, (schema, loc) in refused.items():
        response = deploy(admin_api, f"mark-{name}", schema, STEPS)
        assert response.status_code == 422, name
        (error,) = response.get_json()["error"]["details"]["errors"]
        assert error["loc"] == loc and "properties" in error["msg"], name
    honoured = {
        "type": "object",
        "properties": {
            "pw": {"x-secret": True, "$ref": "#/$defs/text"},
            "nested": {"properties": {"key": {"type": "string", "writeOnly": True}}},
            # Data that looks like a mark, and a property named like one, are not marks.
            "mode": {"enum": [{"x-secret": True}], "default": {"writeOnly": True}},
            "x-secret": True,
        },
        "$defs": {"text": {"type": "string"}},
    }
    assert deploy(admin_api, "mark-ok", honoured, STEPS).status_code == 201


def test_a_property_a_newer_version_marks_secret_is_sealed_and_stays_sealed(app, admin_api):
    # Secretness was decided only when something was saved: a schedule saved under a version
    # where `pw` was plain started runs of the version marking it secret with it in plaintext,
    # and a notes-only save under a version no longer marking `creds` decrypted it for good.
    from app.ticker.tick import run_tick

    plain = {"type": "object", "properties": {"pw": {"type": "string"}}}
    marked = {"type": "object", "properties": {"pw": {"type": "string", "x-secret": True}}}
    assert deploy(admin_api, "versions", plain, STEPS).status_code == 201
    body = {"id": "v", "cron": "0 3 * * *", "workflow": "versions", "input": {"pw": "ver-3c9d"}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    assert deploy(admin_api, "versions", marked, STEPS).status_code == 201  # deploy + activate
    assert admin_api.get("/schedules/v").get_json()["action"]["input"] == {"pw": "***"}
    revision = admin_api.get("/schedules/v").get_json()["revision"]
    trigger = admin_api.post("/schedules/v/trigger", json={}, headers={"If-Match": str(revision)})
    run_id = trigger.get_json()["run_id"]
    SEEN.clear()
    run_tick(app, work=True)
    assert {"pw": "ver-3c9d"} in SEEN
    assert admin_api.get(f"/runs/{run_id}").get_json()["input"] == {"pw": "***"}
    with database(app).session() as session:
        stored = session.scalar(select(Run.input).where(Run.run_id == run_id))
        action = session.scalar(select(Schedule.action).where(Schedule.schedule_id == "v"))
    assert stored["pw"].startswith("enc:v1:") and action["input"]["pw"].startswith("enc:v1:")
    # A version that no longer marks it: an unrelated save keeps the stored secret sealed.
    assert deploy(admin_api, "versions", plain, STEPS).status_code == 201
    revision = admin_api.get("/schedules/v").get_json()["revision"]
    notes = admin_api.request(
        "PATCH", "/schedules/v", json={"notes": "n"}, headers={"If-Match": str(revision)}
    )
    assert notes.status_code == 200, notes.get_json()
    assert notes.get_json()["action"]["input"] == {"pw": "***"}
    with database(app).session() as session:
        action = session.scalar(select(Schedule.action).where(Schedule.schedule_id == "v"))
    assert action["input"]["pw"].startswith("enc:v1:")


def test_a_schedule_pinned_to_an_older_version_is_sealed_too(app, admin_api):
    """Once secret, stays secret: a schedule pinned to the activation of a version that did not
    mark `pw` kept it in plaintext (shown, and copied into every run) after a newer version
    marked it; its actions still receive the plaintext."""
    from app.ticker.tick import run_tick

    plain = {"type": "object", "properties": {"pw": {"type": "string"}}}
    marked = {"type": "object", "properties": {"pw": {"type": "string", "x-secret": True}}}
    assert deploy(admin_api, "pinned", plain, STEPS).status_code == 201
    pin = admin_api.post("/activations", json={"workflow": "pinned", "version": 1}).get_json()["id"]
    body = {"id": "p", "cron": "0 3 * * *", "activation_id": pin, "input": {"pw": "pin-7f2e"}}
    assert admin_api.post("/schedules", json=body).status_code == 201
    assert deploy(admin_api, "pinned", marked, STEPS).status_code == 201  # deploy + activate
    shown = admin_api.get("/schedules/p")
    assert shown.get_json()["action"]["input"] == {"pw": "***"}
    assert "pin-7f2e" not in shown.get_data(as_text=True)
    revision = shown.get_json()["revision"]
    trigger = admin_api.post("/schedules/p/trigger", json={}, headers={"If-Match": str(revision)})
    assert trigger.status_code == 200, trigger.get_json()
    run_id = trigger.get_json()["run_id"]
    SEEN.clear()
    run_tick(app, work=True)
    assert {"pw": "pin-7f2e"} in SEEN
    with database(app).session() as session:
        stored = session.scalar(select(Run.input).where(Run.run_id == run_id))
        action = session.scalar(select(Schedule.action).where(Schedule.schedule_id == "p"))
    assert stored["pw"].startswith("enc:v1:") and action["input"]["pw"].startswith("enc:v1:")


def test_rotate_re_encrypts_with_the_first_key(app, admin_api, runner, monkeypatch):
    from cryptography.fernet import Fernet

    from app.db import rls
    from app.runs import secrets

    # A command's session has no namespace scope of its own (the fixtures give every test
    # session all of them): under PostgreSQL's row security rotate saw no row, said "0 rows",
    # and dropping the old key then lost every secret.
    monkeypatch.setattr(database(app), "scope", rls.NOTHING)
    deploy(admin_api, "pay", SCHEMA, STEPS)
    old_key = app.config.get("ENCRYPTION_KEYS") or None
    first = Fernet.generate_key().decode()
    second = Fernet.generate_key().decode()
    secrets.configure([first])
    try:
        body = {"workflow": "pay", "run_id": "r1", "input": {"token": API_SECRET}}
        assert admin_api.post("/runs", json=body).status_code == 201
        secrets.configure([second, first])
        result = runner.invoke(args=["secrets", "rotate"])
        assert result.exit_code == 0, result.output
        assert "re-encrypted" in result.output and API_SECRET not in result.output
        assert "in 0 row" not in result.output
        secrets.configure([second])  # the old key is gone: everything must still decrypt
        with database(app).session(rls.Scope.all()) as session:
            stored = session.scalar(select(Run.input).where(Run.run_id == "r1"))
        assert secrets.unseal(stored) == {"token": API_SECRET}
    finally:
        if old_key:
            secrets.configure(old_key.split(","))


def test_rotate_holds_the_rows_it_rewrites_so_a_concurrent_save_waits(
    app, admin_api, runner, monkeypatch
):
    # Rotation read a batch, then wrote each row's re-encrypted old value back: a schedule
    # saved in between got its whole action reverted. It now reads and writes in one write
    # transaction holding the rows, so another writer waits (here: gives up at once).
    from sqlalchemy import create_engine, text

    from app.db.session import normalize_url
    from app.runs import secrets

    deploy(admin_api, "pay", SCHEMA, STEPS)
    body = {"workflow": "pay", "run_id": "r1", "input": {"token": API_SECRET}}
    assert admin_api.post("/runs", json=body).status_code == 201
    url = normalize_url(app.config["DATABASE_URL"])
    other = create_engine(url, connect_args={"timeout": 0} if url.startswith("sqlite") else {})
    blocked: list[str] = []
    rotate = secrets.rotate

    def rotate_while_another_writes(value, *rest):
        if not blocked:
            with other.connect() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SET lock_timeout = '100ms'"))
                    conn.execute(text("SELECT set_config('almanac.all_namespaces', 'on', false)"))
                try:
                    conn.execute(text("UPDATE runs SET labels = labels WHERE run_id = 'r1'"))
                    conn.commit()
                    blocked.append("wrote")
                except Exception as exc:  # noqa: BLE001 - the lock is what is asserted
                    blocked.append(type(exc).__name__)
        return rotate(value, *rest)

    monkeypatch.setattr(secrets, "rotate", rotate_while_another_writes)
    result = runner.invoke(args=["secrets", "rotate"])
    other.dispose()
    assert result.exit_code == 0, result.output
    assert blocked == ["OperationalError"]


def test_rotate_without_the_old_key_says_so_in_one_line(app, admin_api, runner):
    from cryptography.fernet import Fernet

    from app.runs import secrets

    deploy(admin_api, "pay", SCHEMA, STEPS)
    saved = dict(secrets._keyring)
    secrets.configure([Fernet.generate_key().decode()])
    try:
        body = {"workflow": "pay", "run_id": "r1", "input": {"token": API_SECRET}}
        assert admin_api.post("/runs", json=body).status_code == 201
        secrets.configure([Fernet.generate_key().decode()])  # the old key was dropped too soon
        result = runner.invoke(args=["secrets", "rotate"])
        assert result.exit_code == 1
        # Nothing was re-encrypted: no row is counted as if part of the job had been done.
        assert "re-encrypted secrets in 0 row(s)" in result.output
        assert "keep the key it was sealed with" in result.output
        assert "Traceback" not in result.output and API_SECRET not in result.output
    finally:
        secrets._keyring.clear()
        secrets._keyring.update(saved)


def test_rotate_re_encrypts_what_it_can_and_names_what_no_key_opens(app, admin_api, runner):
    # One secret whose key was lost made rotate give up on every row: the current key could
    # then never be retired.
    from cryptography.fernet import Fernet

    from app.runs import secrets

    deploy(admin_api, "pay", SCHEMA, STEPS)
    saved = dict(secrets._keyring)
    lost, current, new = (Fernet.generate_key().decode() for _ in range(3))
    try:
        secrets.configure([lost])
        body = {"workflow": "pay", "run_id": "gone", "input": {"token": API_SECRET}}
        assert admin_api.post("/runs", json=body).status_code == 201
        secrets.configure([current])
        body = {"workflow": "pay", "run_id": "kept", "input": {"token": API_SECRET + "2"}}
        assert admin_api.post("/runs", json=body).status_code == 201
        secrets.configure([new, current])
        result = runner.invoke(args=["secrets", "rotate"])
        assert result.exit_code == 1
        # The kept run's input and its run_started event; not the lost ones' rows.
        assert "re-encrypted secrets in 2 row(s)" in result.output
        assert "2 stored secret value(s) were left as they are" in result.output  # input, event
        assert "keep the key it was sealed with" in result.output
        secrets.configure([new])  # the current key retired: what it sealed still opens
        with database(app).session() as session:
            kept = session.scalar(select(Run.input).where(Run.run_id == "kept"))
        assert secrets.unseal(kept) == {"token": API_SECRET + "2"}
    finally:
        secrets._keyring.clear()
        secrets._keyring.update(saved)


def test_text_that_looks_sealed_is_refused_in_input(admin_api):
    deploy(admin_api, "pay", SCHEMA, STEPS)
    body = {"workflow": "pay", "input": {"region": "enc:v1:gAAAAAB"}}
    response = admin_api.post("/runs", json=body)
    assert response.status_code == 422


def test_a_secret_no_key_decrypts_fails_its_run_and_holds_no_other_up(app, admin_api):
    from cryptography.fernet import Fernet

    from app.runs import secrets
    from app.ticker.tick import run_tick

    deploy(admin_api, "pay", SCHEMA, STEPS)
    deploy(admin_api, "plain", None, [{"id": "a", "type": "action", "action": "noop"}])
    saved = dict(secrets._keyring)
    secrets.configure([Fernet.generate_key().decode()])
    try:
        body = {"workflow": "pay", "run_id": "locked", "input": {"token": API_SECRET}}
        assert admin_api.post("/runs", json=body).status_code == 201
        assert admin_api.post("/runs", json={"workflow": "plain", "run_id": "free"}).status_code
        # The key the secret was sealed with is lost: another one is configured.
        secrets.configure([Fernet.generate_key().decode()])
        SEEN.clear()
        run_tick(app, work=True)
        free = admin_api.get("/runs/free").get_json()
        locked = admin_api.get("/runs/locked").get_json()
        assert free["status"] == "completed", free
        assert locked["status"] == "failed", locked
        assert locked["error"]["type"] == "secret_unavailable"
        assert SEEN == []  # the action never ran without its input
        assert API_SECRET not in json.dumps(locked)
    finally:
        secrets._keyring.clear()
        secrets._keyring.update(saved)
