"""An action module that only ALMANAC_ACTION_MODULES loads (see test_actions_module_config)."""

from __future__ import annotations

from app.runs.actions import ActionContext, action


@action("shout")
def shout(ctx: ActionContext) -> str:
    return str(ctx.args).upper()
