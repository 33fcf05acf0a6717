"""`flaky`: fails its first `args.failures` executions per (run, step), then returns "ok"."""

from __future__ import annotations

from collections import Counter

from app.runs.actions import ActionContext, ActionError, action

EXECUTIONS: Counter[tuple[str, str]] = Counter()


@action("flaky")
def flaky(ctx: ActionContext) -> str:
    key = (ctx.run_id, ctx.step_id)
    EXECUTIONS[key] += 1
    if EXECUTIONS[key] <= int(ctx.args.get("failures", 0)):
        raise ActionError(f"execution {EXECUTIONS[key]} fails on purpose")
    return "ok"
