"""Console runs pages and the task inbox through the Flask client."""

from __future__ import annotations

import pytest

from app.ticker.tick import run_tick
from tests.console.conftest import seed_workflow
from tests.console.test_pages import csrf_from, sign_in

TASK_STEPS = [
    {
        "id": "check",
        "type": "task",
        "title": "Check <b>totals</b>",
        "role": "operator",
        "timeout_seconds": 3600,
        "on_timeout": "fail",
    }
]
SIGNAL_STEPS = [
    {
        "id": "wait-approve",
        "type": "signal",
        "signal": "approve",
        "timeout_seconds": 3600,
        "on_timeout": "fail",
    },
    {"id": "done", "type": "action", "action": "noop"},
]


@pytest.fixture
def operator(client, accounts):
    account = accounts.create("olga", role="operator")
    sign_in(client, "olga", account.password)
    return account


def start(api, workflow, run_id):
    response = api.post("/runs", json={"workflow": workflow, "run_id": run_id})
    assert response.status_code == 201, response.get_json()


def test_task_inbox_lists_and_completes(app, client, operator, api_for):
    api = api_for("starter")
    seed_workflow(app, "review", steps=TASK_STEPS)
    start(api, "review", "review-1")
    run_tick(app, work=True)
    inbox = client.get("/ns/default/tasks")
    html = inbox.get_data(as_text=True)
    assert inbox.status_code == 200, html[:500]
    assert "Check &lt;b&gt;totals&lt;/b&gt;" in html and "review-1" in html
    task_id = api.get("/tasks").get_json()["items"][0]["id"]
    done = client.post(
        f"/ns/default/tasks/{task_id}/complete",
        data={"csrf_token": csrf_from(inbox), "output": '{"ok": true}'},
        follow_redirects=True,
    )
    assert "Task completed." in done.get_data(as_text=True)
    run_tick(app, work=True)
    assert api.get("/runs/review-1").get_json()["status"] == "completed"


def test_the_inbox_offers_a_task_only_to_whom_may_complete_it(app, client, operator, api_for):
    api = api_for("starter")
    seed_workflow(app, "sign-off", steps=[{**TASK_STEPS[0], "role": "admin"}])
    seed_workflow(app, "review", steps=TASK_STEPS)
    start(api, "sign-off", "sign-off-1")
    start(api, "review", "review-1")
    run_tick(app, work=True)
    tasks = {task["run_id"]: task["id"] for task in api.get("/tasks").get_json()["items"]}
    html = client.get("/ns/default/tasks").get_data(as_text=True)
    admin_card = html.split(f'id="task-{tasks["sign-off-1"]}"', 1)[1].split("</article>", 1)[0]
    operator_card = html.split(f'id="task-{tasks["review-1"]}"', 1)[1].split("</article>", 1)[0]
    # An operator holds run.manage but not every grant of the admin role the first task names.
    assert "Complete task" not in admin_card and "<textarea" not in admin_card
    assert "needs the run.manage grant and every grant of the admin role" in admin_card
    assert "Complete task" in operator_card
    refused = client.post(
        f"/ns/default/tasks/{tasks['sign-off-1']}/complete",
        data={"csrf_token": csrf_from(client.get("/ns/default/tasks")), "output": "{}"},
        follow_redirects=True,
    )
    assert "needs the &#39;namespace.admin&#39; grant" in refused.get_data(as_text=True)
    still_open = api.get("/tasks", query_string={"status": "open"}).get_json()["items"]
    assert tasks["sign-off-1"] in {task["id"] for task in still_open}


def test_run_detail_signal_and_list_filter(app, client, operator, api_for):
    api = api_for("starter")
    seed_workflow(app, "approval", steps=SIGNAL_STEPS)
    start(api, "approval", "approve-1")
    run_tick(app, work=True)
    page = client.get("/ns/default/runs/approve-1")
    html = page.get_data(as_text=True)
    assert (
        page.status_code == 200 and "waiting" in html and "signal</strong> of wait-approve" in html
    )
    sent = client.post(
        "/ns/default/runs/approve-1/signal",
        follow_redirects=True,
        data={"csrf_token": csrf_from(page), "name": "approve", "payload": "{}"},
    )
    assert "Signal &#39;approve&#39;: delivered" in sent.get_data(as_text=True)
    run_tick(app, work=True)
    assert "completed" in client.get("/ns/default/runs/approve-1").get_data(as_text=True)
    waiting = client.get("/ns/default/runs?status=waiting").get_data(as_text=True)
    assert "approve-1" not in waiting
    completed = client.get("/ns/default/runs?status=completed").get_data(as_text=True)
    assert "approve-1" in completed


def test_terminate_and_viewer_refused(app, client, accounts, api_for):
    api = api_for("starter")
    seed_workflow(app, "approval", steps=SIGNAL_STEPS)
    start(api, "approval", "approve-2")
    run_tick(app, work=True)
    viewer = accounts.create("vic", role="viewer")
    sign_in(client, "vic", viewer.password)
    page = client.get("/ns/default/runs/approve-2")
    assert "Terminate" not in page.get_data(as_text=True)
    refused = client.post(
        "/ns/default/runs/approve-2/terminate", data={"csrf_token": csrf_from(page)}
    )
    assert refused.status_code == 403
    client.post("/logout", data={"csrf_token": csrf_from(page)})
    operator = accounts.create("otto", role="operator")
    sign_in(client, "otto", operator.password)
    page = client.get("/ns/default/runs/approve-2")
    done = client.post(
        "/ns/default/runs/approve-2/terminate",
        data={"csrf_token": csrf_from(page)},
        follow_redirects=True,
    )
    assert "Terminated." in done.get_data(as_text=True)
    assert api.get("/runs/approve-2").get_json()["status"] == "terminated"


def test_a_stale_completion_names_the_task_as_the_inbox_shows_it(app, client, operator, api_for):
    # It said "task '01a24288-…' is already completed": an id shown nowhere on the page.
    api = api_for("starter")
    seed_workflow(app, "review", steps=TASK_STEPS)
    start(api, "review", "review-1")
    run_tick(app, work=True)
    inbox = client.get("/ns/default/tasks")
    task_id = api.get("/tasks").get_json()["items"][0]["id"]
    form = {"csrf_token": csrf_from(inbox), "output": '{"ok": true}'}
    path = f"/ns/default/tasks/{task_id}/complete"
    assert client.post(path, data=form).status_code == 302
    # The same page's form again (another tab, or a double submit without script).
    again = client.post(path, data=form, follow_redirects=True).get_data(as_text=True)
    assert "Task “Check &lt;b&gt;totals&lt;/b&gt;” (step check) is already completed" in again
    assert task_id not in again


def test_a_runs_page_cursor_is_bound_to_the_statuses_it_was_listed_with(
    app, client, operator, api_for
):
    # A console cursor was bound to its namespace and list only: kept in the URL while the
    # status filter changed, it started the other list at a position it never held.
    import re

    api = api_for("starter")
    seed_workflow(app, "review", steps=TASK_STEPS)
    for index in range(52):
        start(api, "review", f"r-{index:02d}")
    first = client.get("/ns/default/runs?status=pending").get_data(as_text=True)
    link = re.search(r'href="(/ns/default/runs\?[^"]*cursor=[^"]+)"', first)
    assert link, "a next-page link"
    cursor = re.search(r"cursor=([^&]+)", link.group(1).replace("&amp;", "&")).group(1)
    followed = client.get(link.group(1).replace("&amp;", "&"))
    assert followed.status_code == 200
    assert "r-00" in followed.get_data(as_text=True)
    for other in ("", "status=running&", "status=pending&status=running&"):
        refused = client.get(f"/ns/default/runs?{other}cursor={cursor}")
        assert refused.status_code == 400, other
        assert "other filters" in refused.get_data(as_text=True)
