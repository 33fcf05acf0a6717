"""Reading schedules: the audit stream's pages, the ledger, lists, grants."""

from __future__ import annotations

import pytest

from app.schedules.audit import EVENT_KEYS

HISTORY_EVENT_FIELDS = {
    "id",
    "sequence",
    "event_type",
    "payload",
    "workflow_instance_id",
    "workflow_run_id",
    "recorded_at",
}


def ten_events(h):
    """Created + 4 x (paused, resumed) + deleted = 10 events."""
    h.create("s")
    for _ in range(4):
        h.post("s", "pause")
        h.post("s", "resume")
    revision = h.read()["revision"]
    h.api.request("DELETE", "/schedules/s", headers={"If-Match": str(revision)})


def test_history_pages_by_sequence_with_limit_4_over_10_events(h):
    ten_events(h)
    cursors, sequences = [], []
    after = None
    while True:
        query = "?limit=4" + (f"&after_sequence={after}" if after is not None else "")
        page = h.api.get(f"/schedules/s/history{query}").get_json()
        assert set(page) == {"schedule_id", "namespace", "events", "next_cursor", "has_more"}
        assert page["schedule_id"] == "s" and page["namespace"] == "default"
        sequences.extend(e["sequence"] for e in page["events"])
        cursors.append((page["next_cursor"], page["has_more"]))
        if page["next_cursor"] is None:
            break
        after = page["next_cursor"]
    assert cursors == [(4, True), (8, True), (None, False)]
    assert sequences == list(range(1, 11))


def test_history_events_have_the_exact_shape_and_payload_keys(h):
    h.create("s")
    h.tick("12:05")
    h.tick("12:10")
    h.post("s", "pause")
    for event in h.history():
        assert set(event) == HISTORY_EVENT_FIELDS
        assert set(event["payload"]) == EVENT_KEYS[event["event_type"]]
    triggered = [e for e in h.history() if e["event_type"] == "ScheduleTriggered"][0]
    assert triggered["workflow_instance_id"] == "schedule:s:20260105T120500Z"
    assert triggered["workflow_run_id"] == h.runs()[0].uid


def test_history_is_readable_after_delete(h):
    ten_events(h)
    page = h.api.get("/schedules/s/history").get_json()
    assert len(page["events"]) == 10 and page["has_more"] is False
    assert page["events"][-1]["event_type"] == "ScheduleDeleted"
    assert h.api.get("/schedules/s/occurrences").status_code == 200
    assert h.api.get("/schedules/s").get_json()["status"] == "deleted"


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "99999999999999999999"])
def test_a_bad_after_sequence_is_an_invalid_cursor(h, after):
    h.create("s")
    response = h.api.get(f"/schedules/s/history?after_sequence={after}")
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_CURSOR"
    assert error["details"]["errors"][0]["loc"] == ["query", "after_sequence"]


@pytest.mark.parametrize("cursor", ["1", "garbage"])
def test_a_list_cursor_on_the_history_is_refused_naming_after_sequence(h, cursor):
    # The stream pages by after_sequence: a list reader sending its next_cursor as `cursor`
    # got the first page again, forever.
    ten_events(h)
    response = h.api.get(f"/schedules/s/history?limit=1&cursor={cursor}")
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_CURSOR" and "after_sequence" in error["message"]
    assert error["details"]["errors"][0]["loc"] == ["query", "cursor"]
    # Empty is absent, as for every query parameter.
    page = h.api.get("/schedules/s/history?limit=1&cursor=").get_json()
    assert [e["sequence"] for e in page["events"]] == [1]


@pytest.mark.parametrize("limit", ["0", "501", "x"])
def test_history_limit_is_1_to_500(h, limit):
    h.create("s")
    response = h.api.get(f"/schedules/s/history?limit={limit}")
    assert response.status_code == 422
    assert response.get_json()["error"]["details"]["errors"][0]["loc"] == ["query", "limit"]


def test_the_ledger_lists_newest_first_with_an_opaque_cursor(h):
    h.create("s", overlap_policy="allow_all")
    for minute in ("12:05", "12:10", "12:15"):
        h.tick(minute)
    first = h.api.get("/schedules/s/occurrences?limit=2").get_json()
    assert [o["instant"][11:16] for o in first["items"]] == ["12:15", "12:10"]
    assert set(first["items"][0]) >= {
        "kind",
        "instant",
        "through",
        "reason",
        "run_id",
        "revision",
        "observed_at",
    }
    second = h.api.get(f"/schedules/s/occurrences?limit=2&cursor={first['next_cursor']}")
    assert [o["instant"][11:16] for o in second.get_json()["items"]] == ["12:05"]
    assert second.get_json()["next_cursor"] is None
    h.create("t")
    foreign = h.api.get(f"/schedules/t/occurrences?cursor={first['next_cursor']}")
    assert foreign.status_code == 400
    assert foreign.get_json()["error"]["code"] == "INVALID_CURSOR"


def test_text_search_ignores_the_case_of_every_letter_on_both_databases(h):
    activation = h.workflow()
    h.create("accented", activation_id=activation, notes="ÉPÉE 100%_done")
    h.create("plain", activation_id=activation, notes="epee without accents")
    for needle in ("ÉPÉE", "épée", "Épée 100%_"):
        items = h.api.get("/schedules", query_string={"q": needle}).get_json()["items"]
        assert [item["schedule_id"] for item in items] == ["accented"], needle
    items = h.api.get("/schedules", query_string={"q": "EPEE"}).get_json()["items"]
    assert [item["schedule_id"] for item in items] == ["plain"]
    # Letters whose lower case depends on who folds them (a final sigma, a dotted capital I)
    # are found by the exact stored text, and % and _ are plain characters.
    h.create("greek", activation_id=activation, notes="ΣΊΣΥΦΟΣ in İstanbul")
    # Typed in lower case as one writes it (a final ς; a plain i) it is found on both databases.
    for needle in ("ΣΊΣΥΦΟΣ", "ΟΣ in", "İstanbul", "σίσυφος", "σίσυφοσ", "istanbul"):
        items = h.api.get("/schedules", query_string={"q": needle}).get_json()["items"]
        assert [item["schedule_id"] for item in items] == ["greek"], needle
    for needle in ("100%_", "%", "_done"):
        items = h.api.get("/schedules", query_string={"q": needle}).get_json()["items"]
        assert [item["schedule_id"] for item in items] == ["accented"], needle


def test_list_filters_and_pages(h):
    activation = h.workflow()
    h.create("a", activation_id=activation, labels={"team": "billing"}, notes="Nightly invoices")
    h.create("b", activation_id=activation, labels={"team": "ops"})
    h.create("c", activation_id=activation, labels={"team": "billing", "tier": "1"})
    h.post("b", "pause")
    h.api.request("DELETE", "/schedules/c", headers={"If-Match": "1"})

    def ids(query=""):
        response = h.api.get(f"/schedules{query}")
        assert response.status_code == 200, response.get_json()
        return [item["schedule_id"] for item in response.get_json()["items"]]

    assert ids() == ["b", "a"]
    assert ids("?include_deleted=true") == ["c", "b", "a"]
    assert ids("?status=paused") == ["b"]
    assert ids("?status=deleted") == ["c"]
    assert ids("?label=team:billing") == ["a"]
    assert ids("?label=team:billing&include_deleted=1&label=tier:1") == ["c"]
    assert ids("?q=NIGHTLY") == ["a"]
    assert ids("?q=invoice-sync") == ["b", "a"]
    page = h.api.get("/schedules?limit=1&include_deleted=true").get_json()
    assert [i["schedule_id"] for i in page["items"]] == ["c"]
    rest = h.api.get(f"/schedules?limit=5&include_deleted=true&cursor={page['next_cursor']}")
    assert [i["schedule_id"] for i in rest.get_json()["items"]] == ["b", "a"]
    assert rest.get_json()["next_cursor"] is None
    # The same filter spelled otherwise binds the cursor alike.
    spelled = h.api.get(f"/schedules?include_deleted=YES&cursor={page['next_cursor']}")
    assert [i["schedule_id"] for i in spelled.get_json()["items"]] == ["b", "a"]
    first = h.api.get("/schedules?limit=1").get_json()["next_cursor"]
    for same in ("include_deleted=", "include_deleted=false", "include_deleted=0"):
        assert h.api.get(f"/schedules?{same}&cursor={first}").status_code == 200, same
    other = h.api.get(f"/schedules?include_deleted=true&cursor={first}")
    assert other.get_json()["error"]["code"] == "INVALID_CURSOR"
    assert h.api.get("/schedules?status=sleeping").status_code == 422
    assert ids("?include_deleted=") == ["b", "a"] and ids("?include_deleted=no") == ["b", "a"]
    maybe = h.api.get("/schedules?include_deleted=maybe")
    assert maybe.status_code == 422
    assert maybe.get_json()["error"]["details"]["errors"][0]["loc"] == ["query", "include_deleted"]
    assert h.api.get("/schedules?label=nocolon").status_code == 422
    assert h.api.get("/schedules?cursor=forged").get_json()["error"]["code"] == "INVALID_CURSOR"


def test_namespaced_paths_and_the_x_namespace_header_agree(h, accounts):
    from tests.conftest import Api

    h.create("s")
    namespaced = h.api.get("/namespaces/default/schedules/s")
    header = h.api.get("/schedules/s", headers={"X-Namespace": "default"})
    assert namespaced.get_json() == header.get_json()
    api = Api(h.api.client, accounts.create("eve", "operator", "other").token)
    assert api.get("/schedules/s", headers={"X-Namespace": "other"}).status_code == 404
    assert api.get("/namespaces/default/schedules/s").status_code == 404


def test_upcoming_lists_the_next_due_times(h):
    h.create("s")
    data = h.api.get("/schedules/s?upcoming=3").get_json()
    assert [u["at"] for u in data["upcoming"]] == [
        "2026-01-05T12:05:00Z",
        "2026-01-05T12:10:00Z",
        "2026-01-05T12:15:00Z",
    ]
    assert len(h.read()["upcoming"]) == 5
    h.post("s", "pause")
    assert h.read()["upcoming"] == []
    assert h.api.get("/schedules/s?upcoming=101").status_code == 422


def test_viewers_read_everything_but_every_change_is_forbidden(h, api_for):
    h.create("s")
    h.tick("12:05")
    viewer = api_for("vera", "viewer")
    for path in ("/schedules", "/schedules/s", "/schedules/s/occurrences", "/schedules/s/history"):
        assert viewer.get(path).status_code == 200, path
    before = h.counts()
    headers = {"If-Match": "1"}
    attempts = [
        viewer.post(
            "/schedules", json={"id": "v", "cron": "* * * * *", "activation_id": h.workflow()}
        ),
        viewer.request("PATCH", "/schedules/s", json={"notes": "x"}, headers=headers),
        viewer.request("DELETE", "/schedules/s", headers=headers),
        *[
            viewer.post(f"/schedules/s/{verb}", json={}, headers=headers)
            for verb in ("pause", "resume", "disable", "enable", "delete", "trigger")
        ],
        viewer.post(
            "/schedules/s/backfill",
            json={"from": "2026-01-05T10:00:00Z", "to": "2026-01-05T11:00:00Z"},
        ),
    ]
    for response in attempts:
        assert response.status_code == 403
        assert response.get_json()["error"]["code"] == "FORBIDDEN"
        assert response.get_json()["error"]["details"]["grant"] == "trigger.manage"
    assert h.counts() == before
