"""What `flask demo seed` deploys and schedules: a small company's namespace, as plain data."""

from __future__ import annotations

from typing import Any

NAMESPACE = "acme"
USERNAME = "demo"
PASSWORD = "demo-password"

WORKFLOWS: list[dict[str, Any]] = [
    {
        "name": "nightly-report",
        "description": "Build the nightly report, let the numbers settle, send it",
        "input_schema": {"type": "object"},
        "steps": [
            {"id": "build", "type": "action", "action": "echo", "args": {"rows": 1280}},
            {"id": "settle", "type": "wait", "duration": "PT10M"},
            {"id": "send", "type": "action", "action": "echo", "args": {"sent": True}},
        ],
    },
    {
        "name": "invoice-sync",
        "description": "Pull new invoices from the billing provider",
        "input_schema": {"type": "object"},
        "steps": [
            {"id": "pull", "type": "action", "action": "noop", "retry": {"max_attempts": 3}},
        ],
    },
    {
        "name": "data-export",
        "description": "Export the warehouse: slow (40 minutes), so overlap policies matter",
        "input_schema": {"type": "object"},
        "steps": [
            {"id": "export", "type": "action", "action": "echo"},
            {"id": "transfer", "type": "wait", "duration": "PT40M"},
            {"id": "verify", "type": "action", "action": "noop"},
        ],
    },
    {
        "name": "payout-approval",
        "description": "Prepare payouts and wait for a person to approve them",
        "input_schema": {"type": "object"},
        "steps": [
            {"id": "prepare", "type": "action", "action": "echo"},
            {
                "id": "approve",
                "type": "task",
                "title": "Approve today's payouts",
                "role": "operator",
                "timeout_seconds": 3 * 86400,
            },
            {"id": "pay", "type": "action", "action": "noop"},
        ],
    },
    {
        "name": "legacy-export",
        "description": "The old FTP export; its server is gone, so it fails after two attempts",
        "input_schema": {"type": "object"},
        "steps": [
            {
                "id": "upload",
                "type": "action",
                "action": "fail",
                "args": {"message": "ftp.legacy.example: connection refused"},
                "retry": {"max_attempts": 2, "backoff_seconds": 5},
            },
        ],
    },
]


def _cron(
    schedule_id: str,
    workflow: str,
    cron: str,
    zone: str = "UTC",
    overlap: str = "skip",
    missed: str = "skip",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": schedule_id,
        "spec": {"cron_expressions": [cron], "timezone": zone},
        "action": {"workflow": workflow, "input": {}},
        "overlap_policy": overlap,
        "missed_policy": missed,
    } | extra


def _every(
    schedule_id: str,
    workflow: str,
    every: str,
    offset: str = "PT0S",
    overlap: str = "skip",
    missed: str = "skip",
) -> dict[str, Any]:
    body = _cron(schedule_id, workflow, "* * * * *", "UTC", overlap, missed)
    body["spec"] = {"intervals": [{"every": every, "offset": offset}]}
    return body


def team(name: str) -> dict[str, Any]:
    return {"labels": {"team": name}}


# About twenty schedules over six time zones, every overlap policy and both missed policies.
SCHEDULES: list[dict[str, Any]] = [
    _cron("report-paris", "nightly-report", "0 2 * * *", "Europe/Paris", **team("finance")),
    _cron(
        "report-new-york", "nightly-report", "0 2 * * *", "America/New_York", "skip", "fire_once"
    ),
    _cron("report-tokyo", "nightly-report", "0 2 * * *", "Asia/Tokyo", **team("finance")),
    _cron("report-weekly", "nightly-report", "0 8 * * 1", "America/Los_Angeles"),
    _cron("invoices-hourly", "invoice-sync", "0 * * * *", "UTC", "allow_all", jitter_seconds=120),
    _cron("invoices-berlin", "invoice-sync", "30 * * * *", "Europe/Berlin", "skip", "fire_once"),
    _cron("month-end-close", "invoice-sync", "0 6 1 * *", "Europe/Paris", **team("finance")),
    _every("invoices-heartbeat", "invoice-sync", "PT10M", overlap="allow_all"),
    _every("cache-warm", "invoice-sync", "PT30M", offset="PT5M", missed="fire_once"),
    _cron("export-skip", "data-export", "*/15 * * * *", "UTC", "skip", **team("data")),
    _cron("export-buffer-one", "data-export", "*/15 * * * *", "UTC", "buffer_one", **team("data")),
    _cron("export-buffer-all", "data-export", "*/30 * * * *", "UTC", "buffer_all", **team("data")),
    _cron("export-cancel-other", "data-export", "*/20 * * * *", "UTC", "cancel_other"),
    _cron("export-terminate-other", "data-export", "10,40 * * * *", "UTC", "terminate_other"),
    _cron("export-allow-all", "data-export", "0 */2 * * *", "Australia/Sydney", "allow_all"),
    _cron("payouts-sydney", "payout-approval", "0 16 * * *", "Australia/Sydney", "buffer_one"),
    _cron("payouts-london", "payout-approval", "0 9 * * 1-5", "Europe/London"),
    _cron("legacy-ftp-export", "legacy-export", "15 */3 * * *", "UTC", **team("data")),
    _cron("vendor-sync", "invoice-sync", "*/30 * * * *", "America/Sao_Paulo"),
    _cron("dst-sensitive", "nightly-report", "30 2 * * *", "Europe/Paris", "skip", "fire_once"),
]
# Pinned to invoice-sync version 1, which the demo retires: the schedule blocks.
PINNED_ID = "billing-v1-pinned"
PAUSED_ID, PAUSE_REASON = "vendor-sync", "the vendor's API is in maintenance until Friday"
