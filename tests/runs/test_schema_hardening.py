"""A workflow's input schema is checked whole at deploy: no `$schema` that would be fetched, no
pattern matched with backtracking `re`, no reference that leads nowhere; `false` refuses every
input; and an input error never quotes a secret, wherever the input puts it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy import text as sql_text

from app.context import database
from app.db.runs import Run, Workflow
from app.db.schedules import Schedule

STEPS = [{"id": "a", "type": "action", "action": "noop"}]
FIXED = datetime(2026, 1, 5, 12, tzinfo=UTC)
WINDOW = {"from": "2026-01-05T12:00:00Z", "to": "2026-01-05T13:00:00Z"}


def deploy(api: Any, name: str, schema: Any) -> Any:
    """Deploy `schema` as a workflow's input schema; activate it when the deploy succeeds."""
    response = api.post("/workflows", json={"name": name, "input_schema": schema, "steps": STEPS})
    if response.status_code == 201:
        assert api.post("/activations", json={"workflow": name}).status_code == 201
    return response


def refusal(response: Any, code: str = "VALIDATION") -> dict[str, Any]:
    """The single error of a 422 with `code`: its `loc` and `msg`."""
    assert response.status_code == 422, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == code
    return error["details"]["errors"][0]  # type: ignore[no-any-return]


def count(app: Any, model: Any) -> int:
    with database(app).session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


# --- $schema: the standard drafts only, never fetched -----------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server answering any GET with a meta-schema; yields its URL and the paths
    it was asked for."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            asked.append(self.path)
            body = b'{"type": "object"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/meta", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_meta_schema_url_is_refused_without_being_fetched(app, admin_api, listener):
    url, asked = listener
    for name, schema, loc in [
        ("root", {"$schema": url, "type": "object"}, ["input_schema", "$schema"]),
        (
            "nested",
            {"$defs": {"x": {"$id": "urn:x", "$schema": url + "#"}}},
            ["input_schema", "$defs", "x", "$schema"],
        ),
        (
            "property",
            {"properties": {"a": {"$schema": url}}},
            ["input_schema", "properties", "a", "$schema"],
        ),
    ]:
        error = refusal(deploy(admin_api, name, schema))
        assert error["loc"] == loc, name
        assert "standard JSON Schema draft" in error["msg"]
    assert asked == []
    assert count(app, Workflow) == 0


@pytest.mark.parametrize(
    "meta",
    [
        "file:///etc/passwd",
        "http://192.0.2.1/unreachable",
        "https://json-schema.org/draft/2020-12/other",
        "http://json-schema.org/draft/2020-12/schema",
        7,
    ],
)
def test_a_schema_other_than_a_standard_draft_is_refused(app, admin_api, meta):
    error = refusal(deploy(admin_api, "other", {"$schema": meta}))
    assert error["loc"] == ["input_schema", "$schema"]
    assert "root:x:0:0" not in error["msg"]
    assert count(app, Workflow) == 0


DRAFTS = [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
]


@pytest.mark.parametrize("meta", DRAFTS)
def test_the_standard_drafts_still_deploy(admin_api, meta):
    schema = {"$schema": meta, "type": "object", "properties": {"n": {"type": "integer"}}}
    assert deploy(admin_api, "std", schema).status_code == 201
    assert admin_api.post("/runs", json={"workflow": "std", "input": {"n": 1}}).status_code == 201
    refused = admin_api.post("/runs", json={"workflow": "std", "input": {"n": "x"}})
    assert refusal(refused, "INPUT_SCHEMA")["loc"] == ["input", "n"]


def test_a_schema_is_checked_by_the_rules_the_validator_applies(app, admin_api):
    # Runs are validated by Draft 2020-12 rules whatever `$schema` says: a draft-04 `items`
    # array deployed, then every run start was a 500.
    schema = {"$schema": DRAFTS[0], "type": "array", "items": [{"type": "string"}]}
    assert refusal(deploy(admin_api, "d4", schema))["loc"] == ["input_schema", "items"]
    assert count(app, Workflow) == 0


# --- unevaluatedProperties and patternProperties, anywhere in one schema -----------------------

EVIL = "^(a+)+$"


@pytest.mark.parametrize(
    ("schema", "loc"),
    [
        (
            {"allOf": [{"patternProperties": {EVIL: {}}}], "unevaluatedProperties": False},
            ["input_schema", "unevaluatedProperties"],
        ),
        (
            {
                "$ref": "#/$defs/x",
                "unevaluatedProperties": False,
                "$defs": {"x": {"patternProperties": {EVIL: {}}}},
            },
            ["input_schema", "unevaluatedProperties"],
        ),
        (
            {
                "properties": {"a": {"unevaluatedProperties": False, "$ref": "#/$defs/p"}},
                "$defs": {"p": {"patternProperties": {"\\pL+": {}}}},
            },
            ["input_schema", "properties", "a", "unevaluatedProperties"],
        ),
    ],
)
def test_unevaluated_properties_is_refused_wherever_pattern_properties_is(
    app, admin_api, schema, loc
):
    error = refusal(deploy(admin_api, "uneval", schema))
    assert error["loc"] == loc
    assert "patternProperties" in error["msg"]
    assert count(app, Workflow) == 0
    assert admin_api.get("/workflows/uneval").status_code == 404


def test_names_that_spell_the_keywords_are_not_keywords(admin_api):
    schema = {
        "properties": {"unevaluatedProperties": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "$defs": {"patternProperties": {"type": "object"}},
        "unevaluatedItems": False,
    }
    assert deploy(admin_api, "names", schema).status_code == 201
    started = admin_api.post("/runs", json={"workflow": "names", "input": {"x-n": 1}})
    assert started.status_code == 201


# --- `false` refuses every input -------------------------------------------------------------


def test_a_false_schema_refuses_every_input_of_a_run_or_a_schedule(app, admin_api):
    assert deploy(admin_api, "closed", False).status_code == 201
    bodies: list[dict[str, Any]] = [
        {"workflow": "closed"},
        {"workflow": "closed", "input": None},
        {"workflow": "closed", "input": {}},
        {"workflow": "closed", "input": "x"},
    ]
    for body in bodies:
        error = refusal(admin_api.post("/runs", json=body), "INPUT_SCHEMA")
        assert error["loc"] == ["input"], body
    for action in ({"workflow": "closed", "input": {"a": 1}}, {"workflow": "closed"}):
        saved = admin_api.post(
            "/schedules", json={"id": "s", "cron": "0 * * * *", "action": action}
        )
        assert refusal(saved, "INPUT_SCHEMA")["loc"] == ["action", "input"], action
        # The message names the field as its `loc` does (it said `input: …`).
        assert saved.get_json()["error"]["message"].startswith("action.input: "), action
    simulated = admin_api.post(
        "/schedules/simulate",
        json={"workflow": "closed", "input": {"a": 1}, "cron": "0 * * * *"} | WINDOW,
    )
    assert refusal(simulated, "INPUT_SCHEMA")["loc"] == ["input"]
    assert count(app, Run) == 0
    assert count(app, Schedule) == 0


def test_a_true_or_empty_schema_accepts_any_input(admin_api):
    for name, schema in (("open", True), ("empty", {})):
        assert deploy(admin_api, name, schema).status_code == 201
        for value in ({}, None, "x", [1]):
            started = admin_api.post("/runs", json={"workflow": name, "input": value})
            assert started.status_code == 201, (name, value)
        saved = admin_api.post(
            "/schedules",
            json={"id": f"s-{name}", "cron": "0 * * * *", "action": {"workflow": name, "input": 5}},
        )
        assert saved.status_code == 201, saved.get_json()


# --- schema errors never quote a secret --------------------------------------------------------

SECRET = "Sup3rS3cretPW"
SECRET_SCHEMA = {
    "type": "object",
    "properties": {
        "pw": {"type": "string", "x-secret": True},
        "creds": {"type": "object", "properties": {"token": {"type": "string", "x-secret": True}}},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        "n": {"type": "integer"},
    },
}


@pytest.mark.parametrize(
    ("value", "loc"),
    [
        ([{"pw": SECRET}], ["input"]),
        (SECRET, ["input"]),
        ({"creds": [{"token": SECRET}]}, ["input", "creds"]),
        ({"creds": SECRET}, ["input", "creds"]),
        # Not a place for a secret, but an array: it might hold one the client misplaced.
        ({"tags": [SECRET, SECRET]}, ["input", "tags"]),
    ],
)
def test_a_schema_error_never_quotes_a_value_that_may_hold_a_secret(admin_api, value, loc):
    assert deploy(admin_api, "sec", SECRET_SCHEMA).status_code == 201
    body = {"workflow": "sec", "input": value}
    schedule = {"id": "s", "cron": "0 * * * *", "action": body}
    simulate = body | {"cron": "0 * * * *"} | WINDOW
    for path, sent in (
        ("/runs", body),
        ("/schedules", schedule),
        ("/schedules/simulate", simulate),
    ):
        refused = admin_api.post(path, json=sent)
        error = refusal(refused, "INPUT_SCHEMA")
        assert error["loc"] == (["action", *loc] if path == "/schedules" else loc), path
        assert SECRET not in refused.get_data(as_text=True), (path, refused.get_json())
        assert "'***'" in error["msg"], error


def test_a_scalar_outside_secret_places_is_still_quoted(admin_api):
    assert deploy(admin_api, "sec", SECRET_SCHEMA).status_code == 201
    refused = admin_api.post("/runs", json={"workflow": "sec", "input": {"n": "seven"}})
    assert refusal(refused, "INPUT_SCHEMA") == {
        "loc": ["input", "n"],
        "msg": "'seven' is not of type 'integer'",
    }


# --- references resolve inside the schema ------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "loc"),
    [
        ({"$ref": "#/$defs/nope"}, ["input_schema", "$ref"]),
        ({"$dynamicRef": "#meta"}, ["input_schema", "$dynamicRef"]),
        ({"$ref": "#nowhere", "$defs": {"a": {"$anchor": "elsewhere"}}}, ["input_schema", "$ref"]),
        (
            {"properties": {"a": {"$ref": "#/properties/b"}}},
            ["input_schema", "properties", "a", "$ref"],
        ),
        ({"allOf": [{"$ref": "#/allOf/x"}]}, ["input_schema", "allOf", 0, "$ref"]),
        ({"minimum": 1, "not": {"$ref": "#/minimum/x"}}, ["input_schema", "not", "$ref"]),
        ({"required": ["a"], "not": {"$ref": "#/required"}}, ["input_schema", "not", "$ref"]),
        ({"$defs": {"a/b": {}}, "$ref": "#/$defs/a/b"}, ["input_schema", "$ref"]),
        # An embedded resource (`$id`) is the document its own `#...` references read.
        (
            {"$defs": {"x": {"$id": "urn:x", "$ref": "#/$defs/y"}, "y": {}}},
            ["input_schema", "$defs", "x", "$ref"],
        ),
        ({"x-note": {"type": 5}, "$ref": "#/x-note"}, ["input_schema", "$ref"]),
    ],
)
def test_a_reference_that_leads_nowhere_is_refused_at_deploy(app, admin_api, schema, loc):
    error = refusal(deploy(admin_api, "refs", schema))
    assert error["loc"] == loc
    assert count(app, Workflow) == 0


def test_references_inside_the_schema_deploy_and_validate(admin_api):
    schema = {
        "type": "object",
        "properties": {
            "child": {"$ref": "#"},
            "slash": {"$ref": "#/$defs/a~1b"},
            "tilde": {"$ref": "#/$defs/c~0d"},
            "percent": {"$ref": "#/$defs/e%25f"},
            "named": {"$ref": "#num"},
            "dynamic": {"$dynamicRef": "#node"},
        },
        "$defs": {
            "a/b": {"type": "string"},
            "c~d": {"type": "string"},
            "e%f": {"type": "string"},
            "num": {"$anchor": "num", "type": "integer"},
            "node": {"$dynamicAnchor": "node", "type": "boolean"},
            # Inside an embedded resource (`$id`), `#...` reads that resource.
            "x": {"$id": "urn:x", "$ref": "#/$defs/n", "$defs": {"n": {"type": "number"}}},
        },
    }
    assert deploy(admin_api, "refs", schema).status_code == 201
    good = {
        "child": {"slash": "s"},
        "slash": "s",
        "tilde": "t",
        "percent": "p",
        "named": 1,
        "dynamic": True,
    }
    assert admin_api.post("/runs", json={"workflow": "refs", "input": good}).status_code == 201
    for key, wrong in (("tilde", 1), ("percent", 1), ("named", "x"), ("dynamic", 1)):
        refused = admin_api.post("/runs", json={"workflow": "refs", "input": {key: wrong}})
        assert refusal(refused, "INPUT_SCHEMA")["loc"] == ["input", key]
    nested = admin_api.post("/runs", json={"workflow": "refs", "input": {"child": {"slash": 1}}})
    assert refusal(nested, "INPUT_SCHEMA")["loc"] == ["input", "child", "slash"]


# --- steps missing their type or action --------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "loc"),
    [
        ({"id": "a"}, ["steps", 0, "type"]),
        ({"id": "a", "type": None}, ["steps", 0, "type"]),
        ({"id": "a", "type": "action"}, ["steps", 0, "action"]),
        (
            {"id": "p", "type": "parallel", "branches": [{"id": "b", "steps": [{"id": "c"}]}]},
            ["steps", 0, "branches", 0, "steps", 0, "type"],
        ),
    ],
)
def test_a_missing_type_or_action_is_required(app, admin_api, step, loc):
    response = admin_api.post("/workflows", json={"name": "w", "steps": [step]})
    error = refusal(response)
    assert error["loc"] == loc
    assert error["msg"].startswith("is required"), error
    assert "None" not in response.get_json()["error"]["message"]
    assert count(app, Workflow) == 0


@pytest.mark.parametrize(
    ("schema", "loc"),
    [
        ({"$ref": "#"}, ["input_schema", "$ref"]),
        ({"allOf": [{"not": {"$ref": "#"}}]}, ["input_schema", "allOf", 0, "not", "$ref"]),
        (
            {
                "$ref": "#/$defs/a",
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            },
            ["input_schema", "$defs", "a", "$ref"],
        ),
        (
            {
                "$defs": {"x": {"$id": "urn:x", "$dynamicAnchor": "n", "$dynamicRef": "#n"}},
                "$ref": "#/$defs/x",
            },
            ["input_schema", "$defs", "x", "$dynamicRef"],
        ),
    ],
)
def test_a_reference_that_loops_in_place_is_refused_at_deploy(app, admin_api, schema, loc):
    # Validating would recurse without end: every run start was a 500.
    error = refusal(deploy(admin_api, "loop", schema))
    assert error["loc"] == loc
    assert count(app, Workflow) == 0


def test_a_reference_that_goes_deeper_into_the_input_may_loop(admin_api):
    tree = {
        "type": "object",
        "properties": {
            "children": {"type": "array", "items": {"$ref": "#"}},
            "n": {"type": "integer"},
        },
        "allOf": [{"$ref": "#/$defs/named"}],
        "$defs": {"named": {"properties": {"name": {"type": "string"}}}},
    }
    assert deploy(admin_api, "tree", tree).status_code == 201
    good = {"children": [{"children": [{"n": 1, "name": "x"}]}]}
    assert admin_api.post("/runs", json={"workflow": "tree", "input": good}).status_code == 201
    bad = {"children": [{"children": [{"n": "one"}]}]}
    refused = admin_api.post("/runs", json={"workflow": "tree", "input": bad})
    assert refusal(refused, "INPUT_SCHEMA")["loc"] == ["input", "children", 0, "children", 0, "n"]


# --- references into data; a check's cost --------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        # What a reference into data leads to was never checked: a backtracking pattern...
        {
            "default": {"unevaluatedProperties": False, "patternProperties": {"^(a+)+$": {}}},
            "$ref": "#/default",
        },
        # ...a loop that failed every run start with a 500...
        {"const": {"$ref": "#/const"}, "$ref": "#/const"},
        # ...a pattern RE2 refuses, a secret mark where none is honoured.
        {"examples": [{"type": "string", "pattern": "(a)\\1"}], "$ref": "#/examples/0"},
        {"properties": {"pw": {"$ref": "#/default"}}, "default": {"x-secret": True}},
        {"enum": [{"type": "string"}], "$ref": "#/enum/0"},
    ],
)
def test_a_reference_into_data_is_refused(app, admin_api, schema):
    error = refusal(deploy(admin_api, "into-data", schema))
    assert error["loc"][-1] == "$ref"
    assert "leads into data" in error["msg"] or "does not lead to a schema" in error["msg"]
    assert count(app, Workflow) == 0


def test_checking_an_input_is_bounded_whatever_its_schema(app, admin_api):
    """References that branch at every level doubled the work with each level of the input:
    a few hundred bytes took minutes of one thread. The check stops past its step budget."""
    branch = {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}, "required": ["a"]}
    schema = {
        "$defs": {"n": {"oneOf": [branch, branch | {"minProperties": 1}, {"type": "integer"}]}},
        "$ref": "#/$defs/n",
    }
    assert deploy(admin_api, "branching", schema).status_code == 201
    value: Any = "x"
    for _ in range(16):
        value = {"a": value}
    error = refusal(admin_api.post("/runs", json={"workflow": "branching", "input": value}),
                    "INPUT_SCHEMA")  # fmt: skip
    assert "more than 100,000 steps" in error["msg"]
    assert count(app, Run) == 0
    # An ordinary input of the same schema is checked as before.
    ok = admin_api.post("/runs", json={"workflow": "branching", "input": 3})
    assert ok.status_code == 201, ok.get_json()


def test_unique_items_are_checked_in_linear_time_with_json_equality(app, admin_api):
    """jsonschema compared every pair of items it could not sort: 4,000 objects took 14 s and a
    250 KB input held a thread for minutes. Equality is still JSON's: `1` is `1.0`, `true` is
    not `1`, objects are equal whatever the order of their keys."""
    from app.runs import lifecycle

    schema = {"properties": {"x": {"uniqueItems": True}}}
    assert deploy(admin_api, "uniq", schema).status_code == 201
    for items, unique in [
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),
        ([1, 1.0], False),
        ([True, 1], True),
        ([[1, {"k": None}], [1, {"k": None}]], False),
        ([{"a": [1, 2]}, {"a": [2, 1]}, "1", 1], True),
    ]:
        response = admin_api.post("/runs", json={"workflow": "uniq", "input": {"x": items}})
        assert response.status_code == (201 if unique else 422), (items, response.get_json())
    # 10,000 objects, the last repeating the first: refused at once (it took about 90 s).
    many = [{"n": i, "tag": "t"} for i in range(10_000)] + [{"tag": "t", "n": 0}]
    done: list[Any] = []

    def check() -> None:
        try:
            lifecycle.validate_input({"input_schema": schema}, {"x": many})
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test reads
            done.append(exc)

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert done and "non-unique" in str(done[0])


def test_other_writers_go_on_while_a_run_starts_input_is_checked(app, admin_api, monkeypatch):
    """A run start checked its input inside its write transaction: on SQLite that held the
    whole database's write lock, so a slow check (up to the budget's second) made every other
    writer wait, or answer 503 BACKEND_BUSY. The check now comes before the write begins."""
    from app.auth.service import create_namespace
    from app.db.session import begin_write
    from app.runs import lifecycle

    assert deploy(admin_api, "checked", {"properties": {"n": {"type": "integer"}}}).status_code
    checked = lifecycle.first_error
    written: list[str] = []

    def write_elsewhere() -> None:
        with database(app).session() as session:
            begin_write(session)
            create_namespace(session, FIXED, "written-meanwhile")
            session.commit()
        written.append("written-meanwhile")

    def first_error(schema: Any, value: Any) -> Any:
        other = threading.Thread(target=write_elsewhere, daemon=True)
        other.start()
        other.join(timeout=10)
        return checked(schema, value)

    monkeypatch.setattr(lifecycle, "first_error", first_error)
    response = admin_api.post("/runs", json={"workflow": "checked", "input": {"n": 1}})
    assert response.status_code == 201, response.get_json()
    assert written == ["written-meanwhile"]
    assert count(app, Run) == 1


def test_a_long_string_against_a_large_pattern_is_charged_to_the_budget(app, admin_api):
    """RE2 is linear in the text, but a large program (counted repetitions) exhausts its DFA
    and falls back to work in text × program size: 250 KB took 43 s of a thread. That work
    now counts against the check's budget, and an ordinary string still passes."""
    large = "[^a]{1000}" * 20 + "a"
    schema = {
        "properties": {
            "s": {"type": "string", "pattern": large},
            "plain": {"type": "string", "pattern": "^[a-z]+$"},
        }
    }
    assert deploy(admin_api, "large-pattern", schema).status_code == 201
    response = admin_api.post(
        "/runs", json={"workflow": "large-pattern", "input": {"s": "b" * 100_000}}
    )
    error = refusal(response, "INPUT_SCHEMA")
    assert "more than 100,000 steps" in error["msg"] and "large patterns" in error["msg"]
    assert count(app, Run) == 0
    # A short string is matched against the large pattern as before (and does not match it)...
    short = admin_api.post("/runs", json={"workflow": "large-pattern", "input": {"s": "b" * 500}})
    assert "does not match" in refusal(short, "INPUT_SCHEMA")["msg"]
    # ...and a long string against a small pattern passes.
    long = {"plain": "x" * 200_000}
    ok = admin_api.post("/runs", json={"workflow": "large-pattern", "input": long})
    assert ok.status_code == 201, ok.get_json()


def test_a_long_enum_is_charged_per_value_it_compares(app, admin_api):
    """`enum` cost one step whatever its length, but compares the instance with every value:
    20,000 items against 5,000 values held a thread for 6-11 s (33 s for a schedule save).
    It now costs a step per 20 values, so the budget refuses such an input at once."""
    values = [f"v{i:04d}" for i in range(5_000)]
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": values}}}}
    assert deploy(admin_api, "long-enum", schema).status_code == 201
    response = admin_api.post("/runs", json={"workflow": "long-enum", "input": {"a": [1] * 20_000}})
    assert "more than 100,000 steps" in refusal(response, "INPUT_SCHEMA")["msg"]
    ok = admin_api.post("/runs", json={"workflow": "long-enum", "input": {"a": ["v4999"] * 10}})
    assert ok.status_code == 201, ok.get_json()


def test_a_long_text_against_a_unicode_pattern_that_re2_checks_fast_passes(app, admin_api):
    """Charging RE2's worst case whole refused texts it checks in milliseconds: 60 KB of words
    against `^(\\p{L}{1,30} ?)+$`, 44 KB against `\\p{L}{20}`."""
    schema = {
        "properties": {
            "words": {"type": "string", "pattern": "^(\\p{L}{1,30} ?)+$"},
            "letters": {"type": "string", "pattern": "\\p{L}{20}"},
        }
    }
    assert deploy(admin_api, "unicode-patterns", schema).status_code == 201
    text = ("wort " * 12_000).strip()
    body = {"workflow": "unicode-patterns", "input": {"words": text, "letters": "x" * 44_000}}
    response = admin_api.post("/runs", json=body)
    assert response.status_code == 201, response.get_json()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_activation_retired_while_the_input_is_checked_starts_no_run(
    app, admin_api, monkeypatch
):
    """On SQLite the input is checked before the write lock, and the pinned activation is then
    read again behind it; the session still held the activation as first read (ready), so a
    run started on an activation retired meanwhile."""
    from app.runs import lifecycle

    assert deploy(admin_api, "retiring", {"properties": {"n": {"type": "integer"}}}).status_code
    activation = admin_api.get("/activations?workflow=retiring").get_json()["items"][0]["id"]
    checked = lifecycle.first_error
    retired: list[int] = []

    def first_error(schema: Any, value: Any) -> Any:
        def retire() -> None:
            retired.append(admin_api.post(f"/activations/{activation}/retire").status_code)

        other = threading.Thread(target=retire, daemon=True)
        other.start()
        other.join(timeout=10)
        return checked(schema, value)

    monkeypatch.setattr(lifecycle, "first_error", first_error)
    response = admin_api.post("/runs", json={"activation_id": activation, "input": {"n": 1}})
    assert retired == [200]
    assert response.status_code == 409, response.get_json()
    assert count(app, Run) == 0


# A lock some transaction of this test's database waits for.
WAITING = sql_text(
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE NOT l.granted AND a.datname = current_database()"
)


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_retire_waits_for_a_run_pinned_to_its_activation(app, admin_api, monkeypatch):
    """On PostgreSQL a retire committed while a pinned run start was checking its input, and
    the run then started on the retired activation. The run start now holds the activation
    until it commits: the retire waits, and is done after the run."""
    from app.runs import lifecycle

    assert deploy(admin_api, "held", {"properties": {"n": {"type": "integer"}}}).status_code
    activation = admin_api.get("/activations?workflow=held").get_json()["items"][0]["id"]
    checked = lifecycle.first_error
    retired: list[int] = []
    waited: list[bool] = []

    def retire() -> None:
        retired.append(admin_api.post(f"/activations/{activation}/retire").status_code)

    other = threading.Thread(target=retire, daemon=True)

    def first_error(schema: Any, value: Any) -> Any:
        other.start()
        with database(app).session() as session:
            for _ in range(500):
                if session.scalar(WAITING):
                    waited.append(True)
                    break
                session.rollback()
                other.join(timeout=0.01)
        return checked(schema, value)

    monkeypatch.setattr(lifecycle, "first_error", first_error)
    response = admin_api.post("/runs", json={"activation_id": activation, "input": {"n": 1}})
    other.join(timeout=30)
    assert response.status_code == 201, response.get_json()
    assert waited == [True] and retired == [200]
    assert count(app, Run) == 1
    state = admin_api.get("/activations?workflow=held").get_json()["items"][0]["status"]
    assert state == "retired"
