"""What a newcomer trips over in the console in the first hour (issue 9), through the Flask
client on both databases; the browser walks are in test_first_hour_browser.py."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from sqlalchemy import func, insert, select

from app.console import session as console_session
from app.console.filters import relative
from app.context import clock, database
from app.db import Membership, Namespace, Schedule, User
from app.ticker.tick import run_tick
from tests.conftest import FIXED_NOW
from tests.console.conftest import seed_workflow
from tests.console.test_form_answers import summary_of
from tests.console.test_pages import csrf_from, sign_in
from tests.console.test_run_pages import TASK_STEPS


def _schedule(api, schedule_id="s", **extra):
    body = {"schedule_id": schedule_id, "cron": "0 * * * *", "workflow": "invoice-sync"}
    response = api.post("/schedules", json=body | extra)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _preview_of(client, **fields) -> str:
    """The new schedule form's live calendar preview of `fields` (as htmx posts it)."""
    token = csrf_from(client.get("/ns/default/schedules/new"))
    response = client.post(
        "/ns/default/calendar/preview",
        headers={"HX-Request": "true"},
        data={"csrf_token": token} | fields,
    )
    assert response.status_code == 200
    return response.get_data(as_text=True)


def _count(client, query):
    response = client.get(f"/ns/default/schedules/s/backfill/count?{query}")
    assert response.status_code == 200
    return response.get_data(as_text=True)


RANGE = "from=2026-01-05T06:00:00Z&to=2026-01-05T10:00:00Z"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("from=2026-01-05T10:00:00Z&to=2026-01-05T06:00:00Z", "To must be after From."),
        ("from=2026-01-05&to=2026-01-05T10:00:00Z", "From: "),
        ("from=2026-01-05T06:00:00Z&to=soon", "To: "),
    ],
)
def test_backfill_count_names_the_range_fields_as_the_form_labels_them(
    client, olga, api_for, query, said
):
    _schedule(api_for("apiuser"))
    text = html.unescape(_count(client, query))
    assert text.startswith(said), text
    assert "'from'" not in text and "'to'" not in text and not text.startswith(("from", "to")), text


def test_backfill_count_of_a_deleted_schedule_says_it_would_be_refused(client, olga, api_for):
    """As the backfill answers (409 SCHEDULE_DELETED), not "past max runs" for every
    occurrence (a schedule deleted when its max_runs ran out read so)."""
    api = api_for("apiuser")
    _schedule(api)
    assert api.request("DELETE", "/schedules/s", headers={"If-Match": '"1"'}).status_code == 200
    text = _count(client, RANGE)
    assert text == "A backfill would be refused: the schedule is deleted."
    refused = api.post(
        "/schedules/s/backfill", json={"from": "2026-01-05T06:00:00Z", "to": "2026-01-05T10:00:00Z"}
    )
    assert refused.status_code == 409
    assert refused.get_json()["error"]["code"] == "SCHEDULE_DELETED"


def test_backfill_count_says_how_many_start_and_how_many_the_overlap_policy_skips(
    client, olga, api_for, app
):
    api = api_for("apiuser")
    _schedule(api)
    assert api.post("/schedules/s/trigger", json={}).get_json()["outcome"] == "triggered"
    text = _count(client, RANGE)
    assert "This range holds 4 occurrences" in text
    assert "0 runs would start" in text and "4 skipped by the overlap policy" in text
    allowed = _count(client, RANGE + "&overlap_policy=allow_all")
    assert "4 runs would start" in allowed and "skipped" not in allowed
    assert "overlap policy: allow all" in allowed
    # The count agrees with what the backfill then does.
    result = api.post(
        "/schedules/s/backfill",
        json={"from": "2026-01-05T06:00:00Z", "to": "2026-01-05T10:00:00Z"},
    ).get_json()
    assert (result["started"], result["skipped"]) == (0, 4)
    refused = _count(client, RANGE + "&overlap_policy=bogus")
    assert "Unknown overlap policy" in refused


def test_backfill_count_respects_max_runs_and_reports_already_started(client, olga, api_for):
    api = api_for("apiuser")
    _schedule(api, overlap_policy="allow_all", max_runs=3)
    body = {"from": "2026-01-05T06:00:00Z", "to": "2026-01-05T07:00:00Z"}
    assert api.post("/schedules/s/backfill", json=body).get_json()["started"] == 1
    text = _count(client, RANGE)
    assert "2 runs would start" in text
    assert "1 past max runs" in text
    assert "1 already started" in text


def test_backfill_form_confirms_only_the_backfill_and_keeps_the_token_out_of_urls(
    client, olga, api_for
):
    _schedule(api_for("apiuser"))
    html = client.get("/ns/default/schedules/s").get_data(as_text=True)
    form = html[html.index('class="backfill stack"') :]
    form = form[: form.index("</form>")]
    assert 'hx-disinherit="*"' in form
    for field in re.findall(r"<(?:input|select)[^>]*hx-get[^>]*>", form):
        assert "hx-confirm" not in field and "closest form" not in field
        assert 'hx-include="#bf-from, #bf-to, #bf-policy"' in field
    assert '<select id="bf-policy" name="overlap_policy"' in form
    assert "the schedule's (skip)" in form


def test_backfill_with_an_override_from_the_console(client, olga, api_for):
    api = api_for("apiuser")
    _schedule(api)
    api.post("/schedules/s/trigger", json={})
    token = csrf_from(client.get("/ns/default/schedules/s"))
    data = {"csrf_token": token, "from": "2026-01-05T06:00:00Z", "to": "2026-01-05T08:00:00Z"}
    done = client.post(
        "/ns/default/schedules/s/backfill",
        data=data | {"overlap_policy": "allow_all"},
        headers={"HX-Request": "true"},
    )
    assert "Backfill started 2 runs" in done.get_data(as_text=True)


def test_labels_show_one_syntax_and_filter_with_either(client, olga, api_for):
    _schedule(api_for("apiuser"), labels={"team": "infra"})
    listed = client.get("/ns/default/schedules").get_data(as_text=True)
    assert "team:infra" in listed and "team=infra" not in listed
    for raw in ("team:infra", "team=infra"):
        rows = client.get(f"/ns/default/schedules?label={raw}").get_data(as_text=True)
        assert 'data-schedule="s"' in rows, raw
    bad = client.get("/ns/default/schedules?label=team")
    assert bad.status_code == 422
    text = bad.get_data(as_text=True)
    assert "is not a label" in text and 'data-schedule="s"' not in text
    detail = client.get("/ns/default/schedules/s").get_data(as_text=True)
    assert "team:infra" in detail and "team=infra" not in detail
    edit = client.get("/ns/default/schedules/s/edit").get_data(as_text=True)
    assert ">\nteam:infra</textarea>" in edit and "one <code>key:value</code> per line" in edit


def test_the_form_takes_labels_with_either_separator(client, olga, api_for):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    response = client.post(
        "/ns/default/schedules/new",
        data={
            "csrf_token": token,
            "schedule_id": "labelled",
            "cron_expressions": "0 2 * * *",
            "workflow": "invoice-sync",
            "labels": "team:infra\nenv=prod\nurl:http://x",
        },
    )
    assert response.status_code == 302, response.get_data(as_text=True)[:2000]
    saved = api_for("apiuser").get("/schedules/labelled").get_json()
    assert saved["labels"] == {"team": "infra", "env": "prod", "url": "http://x"}


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype in {"image/svg+xml", "image/x-icon", "image/vnd.microsoft.icon"}
    assert len(response.data) > 50
    page = client.get("/login").get_data(as_text=True)
    assert 'rel="icon"' in page


def test_run_detail_names_workflow_and_version(client, olga, api_for, app):
    api = api_for("apiuser")
    assert api.post("/runs", json={"workflow": "invoice-sync", "run_id": "r-1"}).status_code == 201
    run_tick(app, work=True)
    html = client.get("/ns/default/runs/r-1").get_data(as_text=True)
    assert re.search(r"<dt>Workflow</dt><dd>invoice-sync <[^>]+>version 1<", html), html[:3000]


def test_load_chart_counts_only_the_runs_a_schedule_has_left(client, olga, api_for):
    _schedule(api_for("apiuser"), cron="* * * * *", max_runs=1)
    html = client.get("/ns/default/load").get_data(as_text=True)
    assert "1 runs starting in the next 24 h" in html


def test_landing_is_the_last_namespace_used_else_default(client, app, accounts):
    account = accounts.create("nina", role="operator", namespace="billing")
    accounts.create("nina-default", role="operator", namespace="default")
    _member(app, "nina", "default")
    sign_in(client, "nina", account.password)
    assert client.get("/").headers["Location"].endswith("/ns/default/")
    assert client.get("/ns/billing/schedules").status_code == 200
    client.post("/logout", data={"csrf_token": csrf_from(client.get("/ns/billing/schedules"))})
    sign_in(client, "nina", account.password)
    assert client.get("/").headers["Location"].endswith("/ns/billing/")


def test_landing_without_default_is_the_first_namespace(client, app, accounts):
    account = accounts.create("omar", role="operator", namespace="zeta")
    _member(app, "omar", "alpha")
    sign_in(client, "omar", account.password)
    assert client.get("/").headers["Location"].endswith("/ns/alpha/")


def test_a_refused_output_over_htmx_is_that_task_card_alone(client, olga, api_for, app):
    first, second = _open_tasks(app, api_for("apiuser"))
    token = csrf_from(client.get("/ns/default/tasks"))
    response = client.post(
        f"/ns/default/tasks/{first}/complete",
        data={"csrf_token": token, "output": "{nope"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert html.count("<article") == 1 and f'id="task-{first}"' in html
    assert f'id="task-{second}"' not in html and "<html" not in html
    assert "{nope</textarea>" in html and "not valid JSON" in html
    assert all(t["status"] == "open" for t in api_for("reader").get("/tasks").get_json()["items"])


def _member(app, username, namespace):
    with database(app).session() as session:
        ns = session.scalar(select(Namespace).where(Namespace.name == namespace))
        if ns is None:
            ns = Namespace(name=namespace, created_at=FIXED_NOW)
            session.add(ns)
            session.flush()
        user = session.scalar(select(User).where(User.username == username))
        session.add(Membership(user_id=user.id, namespace_id=ns.id, role="operator"))
        session.commit()


def _open_tasks(app, api):
    seed_workflow(app, "review", steps=TASK_STEPS)
    for run_id in ("review-1", "review-2"):
        assert api.post("/runs", json={"workflow": "review", "run_id": run_id}).status_code == 201
    run_tick(app, work=True)
    return [task["id"] for task in api.get("/tasks").get_json()["items"]]


def test_task_inbox_keeps_the_input_and_shows_the_error_under_that_task(client, olga, api_for, app):
    first, second = _open_tasks(app, api_for("apiuser"))
    token = csrf_from(client.get("/ns/default/tasks"))
    typed = '{"approved": tru'
    response = client.post(
        f"/ns/default/tasks/{first}/complete", data={"csrf_token": token, "output": typed}
    )
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    card = html[html.index(f'id="task-{first}"') :]
    card = card[: card.index("</article>")]
    assert "{&#34;approved&#34;: tru</textarea>" in card
    assert f'id="output-error-{first}"' in card and "Output is not valid JSON" in card
    other = html[html.index(f'id="task-{second}"') :]
    assert ">{}</textarea>" in other[: other.index("</article>")]
    assert "flash-error" not in html
    assert all(t["status"] == "open" for t in api_for("reader").get("/tasks").get_json()["items"])


FIVE_MISTAKES = {
    "schedule_id": "nightly",
    "cron_expressions": "0 25 * * *",
    "timezone": "america/new_york",
    "workflow": "invoice-sync",
    "input": "{oops",
    "max_runs": "0",
    "labels": "no separator here",
    "notes": "kept as typed",
}


def test_the_form_reports_every_mistake_in_one_submit_with_a_linked_summary(client, olga, app):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    response = client.post("/ns/default/schedules/new", data={"csrf_token": token} | FIVE_MISTAKES)
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    for field in ("cron_expressions", "timezone", "input", "max_runs", "labels"):
        assert f'id="err-{field}"' in html, field
        assert f'<a href="#{field}">' in html, field
    summary = html[html.index('id="error-summary"') :]
    assert summary.index("5 problems") < summary.index('<a href="#cron_expressions">')
    assert 'tabindex="-1"' in html[html.index('id="error-summary"') - 200 :][:400]
    assert "America/New_York" in html  # did you mean
    assert "must be null" not in html
    assert 'value="nightly"' in html and "kept as typed</textarea>" in html
    assert "{oops</textarea>" in html and "no separator here</textarea>" in html
    assert 'value="0"' in html  # max_runs as typed
    with database(app).session() as session:
        assert session.scalar(select(User).where(User.username == "olga")) is not None


def test_a_bad_schedule_id_is_one_of_the_mistakes_of_the_first_submit(client, olga, app):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    typed = FIVE_MISTAKES | {"schedule_id": "night ly/2"}
    response = client.post("/ns/default/schedules/new", data={"csrf_token": token} | typed)
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    summary = html[html.index('id="error-summary"') :]
    assert "6 problems" in summary and '<a href="#schedule_id">' in summary
    assert re.search(r'id="err-schedule_id"[^>]*>[^<]*1-128 characters', html)
    assert 'value="night ly/2"' in html
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(Schedule)) == 0


def test_a_bad_interval_is_named_in_the_same_submit_as_a_bad_cron(client, olga, app):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    typed = FIVE_MISTAKES | {"intervals": "PT1H\nPT1M30S offset PT5M\nP1M"}
    response = client.post("/ns/default/schedules/new", data={"csrf_token": token} | typed)
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    summary = html[html.index('id="error-summary"') :]
    assert "6 problems" in summary and '<a href="#intervals">' in summary
    error = re.search(r'id="err-intervals"[^>]*>([^<]*)<', html)
    assert error and "PT1M30S offset PT5M" in error.group(1), error
    assert "less than every" in error.group(1)
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(Schedule)) == 0


def test_memo_and_search_attributes_that_are_not_objects_are_named_in_the_first_submit(
    client, olga, app
):
    token = csrf_from(client.get("/ns/default/schedules/new"))
    typed = FIVE_MISTAKES | {"memo": "[1]", "search_attributes": '"x"'}
    response = client.post("/ns/default/schedules/new", data={"csrf_token": token} | typed)
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    summary = html[html.index('id="error-summary"') :]
    assert "7 problems" in summary
    for field in ("memo", "search_attributes"):
        assert f'<a href="#{field}">' in summary
        assert re.search(rf'id="err-{field}"[^>]*>[^<]*must be an object', html)
    with database(app).session() as session:
        assert session.scalar(select(func.count()).select_from(Schedule)) == 0


def test_the_empty_form_shows_a_neutral_preview(client, olga):
    html = _preview_of(client, cron_expressions="", intervals="", timezone="UTC")
    assert "preview-error" not in html and "needs at least one" not in html
    assert "Type a cron expression or an interval" in html


def test_history_rows_read_in_one_line_and_jump_to_latest_loads_the_last_page(
    client, olga, api_for
):
    api = api_for("apiuser")
    _schedule(api)
    revision = 1
    for index in range(120):
        verb = "pause" if index % 2 == 0 else "resume"
        body = {"reason": "maintenance window"} if verb == "pause" else {}
        response = api.post(f"/schedules/s/{verb}", json=body, headers={"If-Match": str(revision)})
        assert response.status_code == 200
        revision += 1
    patched = api.request(
        "PATCH", "/schedules/s", json={"notes": "n"}, headers={"If-Match": str(revision)}
    )
    assert patched.status_code == 200, patched.get_json()
    first = client.get("/ns/default/schedules/s/history", headers={"HX-Request": "true"})
    html = first.get_data(as_text=True)
    assert "apiuser via api: created" in html
    assert "apiuser via api: paused (maintenance window)" in html
    assert "Jump to latest" in html
    # One control per row: the summary; only the first row's is a Tab stop.
    assert html.count("<summary") == 100 and html.count('<summary tabindex="-1">') == 99
    assert "<details><summary>payload</summary>" not in html
    latest = client.get(
        "/ns/default/schedules/s/history?latest=1", headers={"HX-Request": "true"}
    ).get_data(as_text=True)
    sequences = [int(n) for n in re.findall(r'data-sequence="(\d+)"', latest)]
    assert sequences == list(range(23, 123))
    assert "apiuser via api: updated notes" in latest
    assert "Load more" not in latest and "From the start" in latest


def _previewed(client, url, token, **fields):
    data = {"csrf_token": token, "timezone": "UTC", "intervals": ""} | fields
    html = client.post(url, headers={"HX-Request": "true"}, data=data).get_data(as_text=True)
    return re.findall(r'<time datetime="([^"]+)"', html)


def _z(values):
    return [value.replace("+00:00", "Z") for value in values]


def test_the_form_preview_shows_the_due_times_the_schedule_will_use_with_jitter(
    client, olga, api_for
):
    """Jitter is drawn from the schedule's uid: the edit form previewed with an empty one, so
    its "Next fires" differed from the schedule's own due times and from the simulation beside
    it. An edited schedule previews its own; a new one agrees with its simulation."""
    api = api_for("apiuser")
    _schedule(api, "jit", jitter_seconds=40, timezone="Australia/Sydney")
    upcoming = [item["at"] for item in api.get("/schedules/jit?upcoming=4").get_json()["upcoming"]]
    form = client.get("/ns/default/schedules/jit/edit").get_data(as_text=True)
    url = re.search(r'hx-post="([^"]*calendar/preview[^"]*)"', form).group(1).replace("&amp;", "&")
    token = csrf_from(client.get("/ns/default/schedules/jit/edit"))
    shown = _previewed(
        client, url, token, cron_expressions="0 * * * *", timezone="Australia/Sydney",
        jitter_seconds="40",
    )  # fmt: skip
    assert _z(shown)[:4] == upcoming
    assert len(set(at[17:19] for at in upcoming)) > 1  # jittered, not all on the minute
    # A new schedule: the preview agrees with the simulation of the same form.
    token = csrf_from(client.get("/ns/default/schedules/new"))
    shown = _previewed(
        client, "/ns/default/calendar/preview", token, schedule_id="sim-test",
        cron_expressions="*/20 * * * *", timezone="America/New_York", jitter_seconds="30",
    )  # fmt: skip
    body = {
        "id": "sim-test", "cron": "*/20 * * * *", "timezone": "America/New_York",
        "jitter_seconds": 30, "action": {"workflow": "invoice-sync"},
        # Saved just before 12:00:01, as the form would save it now (12:00:00).
        "from": "2026-01-05T12:00:01Z", "to": "2026-01-05T15:00:00Z",
    }  # fmt: skip
    simulated = api.post("/schedules/simulate", json=body).get_json()["items"]
    assert _z(shown[:4]) == [item["due_at"] for item in simulated[:4]]


def _set_clock(app, when):
    with database(app).session() as session:
        clock(app).set(session, when)
        session.commit()


def test_the_form_preview_lists_only_what_the_saved_schedule_will_fire(app, client, olga, api_for):
    """A save starts a new calendar after now: an occurrence at or before now never fires,
    even when its jitter would put it later, so the preview does not list it (it did)."""
    api = api_for("apiuser")
    _schedule(api, "jit", cron="*/10 * * * *", jitter_seconds=599)  # cursor at 12:00
    _set_clock(app, FIXED_NOW + timedelta(minutes=10, seconds=1))  # 12:10 is due, not ticked
    token = csrf_from(client.get("/ns/default/schedules/new"))
    fresh = _z(
        _previewed(
            client, "/ns/default/calendar/preview", token, schedule_id="fresh",
            cron_expressions="*/10 * * * *", jitter_seconds="599",
        )
    )  # fmt: skip
    assert fresh[0] >= "2026-01-05T12:20:00Z"
    # The edited schedule with its calendar as it is: its own forecast, the pending 12:10 first.
    form = client.get("/ns/default/schedules/jit/edit").get_data(as_text=True)
    url = re.search(r'hx-post="([^"]*calendar/preview[^"]*)"', form).group(1).replace("&amp;", "&")
    upcoming = [item["at"] for item in api.get("/schedules/jit?upcoming=3").get_json()["upcoming"]]
    assert upcoming[0] < "2026-01-05T12:20:00Z"
    fields = {"jitter_seconds": "599"}
    kept = _previewed(client, url, token, cron_expressions="*/10 * * * *", **fields)
    assert _z(kept)[:3] == upcoming
    # Spelled anew, it still fires alike: the same forecast.
    respelled = _previewed(client, url, token, cron_expressions="0-59/10 * * * *", **fields)
    assert _z(respelled)[:3] == upcoming
    # A new calendar starts after now: the 12:10 occurrence is gone, as it is once saved.
    lines = "*/10 * * * *\r\n5-59/10 * * * *"
    changed = _z(_previewed(client, url, token, cron_expressions=lines, **fields))
    patch = {"spec": {"cron_expressions": ["*/10 * * * *", "5-59/10 * * * *"]}}
    saved = api.request("PATCH", "/schedules/jit", json=patch, headers={"If-Match": "1"})
    assert saved.status_code == 200, saved.get_json()
    after = [item["at"] for item in api.get("/schedules/jit?upcoming=3").get_json()["upcoming"]]
    assert changed[:3] == after and after[0] >= "2026-01-05T12:15:00Z"


@pytest.mark.parametrize("jitter", ["3601", "-1", "1.5", "١٢"])
def test_the_form_preview_names_a_jitter_the_save_refuses(client, olga, jitter):
    html = _preview_of(client, cron_expressions="0 0 * * *", jitter_seconds=jitter)
    # Named as the form labels the field.
    assert "<strong>Jitter seconds:</strong>" in html and "must be a whole number" in html
    assert "<time" not in html


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"cron_expressions": "61 * * * *"}, "Cron expressions"),
        ({"intervals": "PT6X"}, "Intervals"),
        ({"cron_expressions": "0 0 * * *", "timezone": "Mars/Olympus"}, "Time zone"),
        (
            {
                "cron_expressions": "0 0 * * *",
                "start_at": "2030-01-02T00:00:00Z",
                "end_at": "2030-01-01T00:00:00Z",
            },
            "End at",
        ),
    ],
)
def test_the_form_preview_names_a_mistake_by_the_fields_label(client, olga, fields, named):
    html = _preview_of(client, **({"timezone": "UTC"} | fields))
    assert 'class="preview-error"' in html, html
    assert f"<strong>{named}:</strong>" in html, html
    assert "_" not in re.sub(r"<[^>]+>", "", html), html  # no field's code name shows


@pytest.mark.parametrize(
    "field, value",
    [
        ("cron_expressions", "\t0 0 * * *"),
        ("cron_expressions", "0 0 * * *\u00a0"),
        ("cron_expressions", "0 0 * * *\u20280 1 * * *"),
        ("intervals", "PT1H\toffset\tPT5M"),
        ("timezone", " UTC "),
    ],
)
def test_the_form_refuses_the_whitespace_the_api_refuses(client, olga, api_for, field, value):
    """A tab, a no-break space or a Unicode line separator in a calendar field is refused, as
    the API refuses it; the form read them as spaces or a second line and saved."""
    data = {"cron_expressions": "", "intervals": "", "timezone": "UTC", field: value}
    spec = {"cron_expressions": [data["cron_expressions"]]} if data["cron_expressions"] else {}
    if data["intervals"]:
        spec["intervals"] = [{"every": data["intervals"]}]
    else:
        spec.setdefault("cron_expressions", ["0 0 * * *"])
    spec["timezone"] = data["timezone"]
    api = api_for("apiuser")
    refused = api.post("/schedules", json={"id": "w", "spec": spec, "workflow": "invoice-sync"})
    assert refused.status_code == 422
    if field == "timezone":
        data["cron_expressions"] = "0 0 * * *"
    form = client.get("/ns/default/schedules/new")
    response = client.post(
        "/ns/default/schedules/new",
        data={"csrf_token": csrf_from(form), "schedule_id": "w", "workflow": "invoice-sync"} | data,
    )
    assert response.status_code == 422
    assert api.get("/schedules/w").status_code == 404


def test_preview_notes_that_a_fixed_offset_zone_never_observes_dst(client, olga):
    html = _preview_of(client, cron_expressions="0 9 * * *", timezone="EST")
    assert "EST is a fixed offset (UTC−05:00) and never observes daylight saving time" in html
    assert "14:00:00 UTC" in html


def test_conflict_banner_names_fields_as_the_form_labels_them(client, olga, api_for):
    api = api_for("apiuser")
    _schedule(api)
    form = client.get("/ns/default/schedules/s/edit")
    token = csrf_from(form)
    patched = api.request(
        "PATCH", "/schedules/s", json={"overlap_policy": "allow_all"}, headers={"If-Match": "1"}
    )
    assert patched.status_code == 200
    banner = _conflict_banner(client, token, cron_expressions="0 * * * *")
    assert "Overlap policy" in banner and "overlap_policy" not in banner


def test_conflict_banner_ignores_the_line_endings_a_browser_sends(client, olga, api_for):
    api = api_for("apiuser")
    body = {
        "schedule_id": "s",
        "workflow": "invoice-sync",
        "labels": {"team": "billing", "tier": "1"},
    }
    body["spec"] = {"cron_expressions": ["0 * * * *", "30 6 * * 1"]}
    assert api.post("/schedules", json=body).status_code == 201
    form = client.get("/ns/default/schedules/s/edit")
    patched = api.request("PATCH", "/schedules/s", json={"notes": "n"}, headers={"If-Match": "1"})
    assert patched.status_code == 200
    # A textarea comes back with CRLF line endings, whatever it was sent with.
    banner = _conflict_banner(
        client,
        csrf_from(form),
        cron_expressions="0 * * * *\r\n30 6 * * 1\r\n",
        labels="team:billing\r\ntier:1",
        input="{ }",
        memo="{}",
        search_attributes="{}\r\n",
        jitter_seconds="0",
    )
    assert "<strong>Notes</strong>" in banner, banner


def _conflict_banner(client, token: str, **fields: str) -> str:
    """Save the edit form of schedule `s` at revision 1 (another writer moved it on): the
    conflict banner of the 409 page."""
    form = {"csrf_token": token, "revision": "1", "timezone": "UTC", "workflow": "invoice-sync"}
    form |= {"overlap_policy": "skip", "missed_policy": "skip"} | fields
    response = client.post("/ns/default/schedules/s/edit", data=form)
    assert response.status_code == 409
    html = response.get_data(as_text=True)
    return html[html.index('class="conflict"') :][:1500]


def test_relative_times_say_just_now_rather_than_in_zero_seconds():
    assert relative(FIXED_NOW, FIXED_NOW) == "just now"
    assert relative(FIXED_NOW + timedelta(seconds=90), FIXED_NOW) == "in 1 min"
    # Within ten seconds either way reads "just now" (docs/console.md); beyond, seconds ago.
    assert relative(FIXED_NOW - timedelta(seconds=5), FIXED_NOW) == "just now"
    assert relative(FIXED_NOW - timedelta(seconds=15), FIXED_NOW) == "15 s ago"


def test_remembering_the_namespace_waits_for_another_writer(client, app, accounts, monkeypatch):
    # The page read the namespace, then another writer (the ticker, a save) committed before
    # the page remembered it as the last one used: the page still answers, and remembers it.
    account = accounts.create("pia", role="operator", namespace="billing")
    _member(app, "pia", "default")
    sign_in(client, "pia", account.password)
    real = console_session.require_grant

    def grant_then_another_writer_commits(*args, **kwargs):
        real(*args, **kwargs)
        with database(app).engine.begin() as conn:
            conn.execute(insert(Namespace).values(name="written-meanwhile", created_at=FIXED_NOW))

    monkeypatch.setattr(console_session, "require_grant", grant_then_another_writer_commits)
    assert client.get("/ns/billing/schedules").status_code == 200
    with database(app).session() as session:
        user = session.scalar(select(User).where(User.username == "pia"))
        assert user.last_namespace == "billing"
        assert session.scalar(select(Namespace.id).where(Namespace.name == "written-meanwhile"))


def test_backfill_count_quotes_its_query_as_text_never_as_markup(client, olga, api_for):
    """The count is swapped into the page as HTML: a link carrying markup in the range or the
    policy (a meta refresh, htmx attributes acting with the reader's session) shows it as text."""
    _schedule(api_for("apiuser"))
    planted = '<div hx-post="/x" hx-trigger="load">'
    for query in (
        f"from={quote(planted)}&to=2026-01-05T10:00:00Z",
        f"from=2026-01-05T06:00:00Z&to={quote(planted)}",
        f"{RANGE}&overlap_policy={quote(planted)}",
    ):
        text = _count(client, query)
        assert "<" not in text and "&lt;div hx-post=" in text, (query, text)


def test_backfill_count_without_a_ready_activation_says_it_would_be_refused(
    app, client, olga, api_for
):
    """As the backfill answers (409, activation_not_ready), not "1 run would start"."""
    api = api_for("apiuser")
    _schedule(api)
    deployer = api_for("dora", "deployer")
    [activation] = deployer.get("/activations?status=ready").get_json()["items"]
    assert deployer.post(f"/activations/{activation['id']}/retire", json={}).status_code == 200
    text = _count(client, RANGE)
    assert text == ("A backfill would be refused: the schedule has no ready activation to start.")
    window = {"from": "2026-01-05T06:00:00Z", "to": "2026-01-05T10:00:00Z"}
    refused = api.post("/schedules/s/backfill", json=window)
    assert refused.status_code == 409
    assert refused.get_json()["error"]["details"]["reason"] == "activation_not_ready"


def test_a_schedules_bounds_read_as_times_like_the_rest_of_the_page(client, olga, api_for):
    api = api_for("apiuser")
    spec = {"cron_expressions": ["0 * * * *"], "end_at": "2026-02-01T00:00:00Z"}
    body = {"schedule_id": "bounded", "spec": spec, "workflow": "invoice-sync"}
    assert api.post("/schedules", json=body).status_code == 201
    html = client.get("/ns/default/schedules/bounded").get_data(as_text=True)
    bounds = re.search(r"<dt>Bounds</dt><dd>(.*?)</dd>", html, re.S).group(1)
    assert "2026-02-01T00:00:00Z" not in bounds
    assert '<time datetime="2026-02-01T00:00:00+00:00"' in bounds and "2026-02-01 00:00" in bounds
    assert bounds.startswith("… →")


def test_the_form_refuses_a_label_key_given_twice(client, olga, api_for):
    """`k=v` then `k=w` kept the last value; a JSON body giving one key twice is refused too."""
    form = client.get("/ns/default/schedules/new")
    data = {
        "csrf_token": csrf_from(form), "schedule_id": "twice", "workflow": "invoice-sync",
        "cron_expressions": "0 0 * * *", "timezone": "UTC", "labels": "k=v\r\nk=w",
    }  # fmt: skip
    response = client.post("/ns/default/schedules/new", data=data)
    assert response.status_code == 422
    assert "the key &#39;k&#39; is given twice" in response.get_data(as_text=True)
    assert api_for("apiuser").get("/schedules/twice").status_code == 404


def test_the_form_preview_names_every_calendar_mistake_at_once(client, olga):
    html = _preview_of(
        client,
        cron_expressions="61 * * * *",
        intervals="PT6X",
        timezone="Mars/Olympus",
        jitter_seconds="-1",
        workflow="",  # not the preview's business
    )
    named = re.findall(r"<strong>([^<]+):</strong>", html)
    assert named == ["Cron expressions", "Intervals", "Time zone", "Jitter seconds"], html


def test_save_names_end_before_start_beside_the_other_mistakes(client, olga):
    # Only "Workflow: name a workflow" was listed: the calendar's own check was left to the
    # save, which the first mistake kept from running.
    reversed_bounds = {"start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}
    fields = {"schedule_id": "both", "cron_expressions": "0 6 * * *", "workflow": ""}
    token = csrf_from(client.get("/ns/default/schedules/new"))
    refused = client.post(
        "/ns/default/schedules/new", data={"csrf_token": token} | fields | reversed_bounds
    )
    assert refused.status_code == 422
    assert summary_of(refused.get_data(as_text=True)) == [
        "End at: must not be before Start at",
        "Workflow: name a workflow (or pin an activation id)",
    ]
