"""A schedule page names states the status badge alone does not explain."""

from __future__ import annotations

from tests.console.test_pages import sign_in


def test_a_schedule_draining_after_its_calendar_ended_says_so(h, client, accounts):
    """Active with no next due time reads as a schedule waiting for its last buffered runs,
    not as one that forgot its calendar."""
    activation = h.workflow()
    spec = {"cron_expressions": ["*/5 * * * *"], "end_at": "2026-01-05T12:10:00Z"}
    h.save({"id": "s", "spec": spec, "activation_id": activation, "overlap_policy": "buffer_all"})
    h.tick("12:05")
    h.tick("12:10")
    account = accounts.create("vic", role="viewer")
    sign_in(client, "vic", account.password)
    page = client.get("/ns/default/schedules/s").get_data(as_text=True)
    assert "none: the calendar has ended; 1 buffered still to run, then it blocks" in page
    h.finish()
    h.tick("12:10:01")
    page = client.get("/ns/default/schedules/s").get_data(as_text=True)
    assert "the calendar has ended" not in page and "calendar exhausted" in page
