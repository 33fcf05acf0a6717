"""The action registry: Python callables a workflow's `action` steps run, by name.

Register more with the decorator in a module named in `ALMANAC_ACTION_MODULES`:

    from app.runs.actions import ActionContext, action

    @action("charge-card")
    def charge_card(ctx: ActionContext) -> dict:
        return {"charged": ctx.args["amount"]}

Delivery is at least once: an action may run again after a worker dies, so it must tolerate a
repeat (use `ctx.run_id` and `ctx.step_id` as an idempotency key: `ctx.attempt` starts at 1
again when an incident is resolved with retry, so it does not tell two executions apart).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.settings import SettingError

# `sleep` is for demos and tests: never hold a worker thread longer than this.
SLEEP_CAP_SECONDS = 30.0


@dataclass(frozen=True)
class ActionContext:
    """What an action sees: its run, its step, its arguments and what earlier steps returned."""

    run_id: str
    namespace: str
    step_id: str
    attempt: int
    args: Any
    input: Any
    step_outputs: dict[str, Any] = field(default_factory=dict)


class ActionError(Exception):
    """Raise from an action to fail the step with a clean message (retried per its policy)."""


Action = Callable[[ActionContext], Any]

_REGISTRY: dict[str, Action] = {}
_LOADED: set[str] = set()
_LOCK = threading.Lock()


def action(name: str) -> Callable[[Action], Action]:
    """Register the decorated callable as the action `name` (a later registration replaces it)."""

    def register(fn: Action) -> Action:
        _REGISTRY[name] = fn
        return fn

    return register


def get_action(name: str) -> Action | None:
    return _REGISTRY.get(name)


def registered() -> frozenset[str]:
    return frozenset(_REGISTRY)


def load_modules(names: str | list[str] | tuple[str, ...] | None) -> None:
    """Import every module of `names` (comma-separated or a list) so its actions register."""
    if not names:
        return
    modules = names.split(",") if isinstance(names, str) else list(names)
    with _LOCK:
        for module in (m.strip() for m in modules):
            if module and module not in _LOADED:
                try:
                    importlib.import_module(module)
                except ImportError as exc:
                    # Named, at start: flask would otherwise answer "No such command" to every
                    # command of a process that cannot load its actions.
                    raise SettingError(
                        f"ALMANAC_ACTION_MODULES: cannot import {module!r} ({exc})"
                    ) from None
                _LOADED.add(module)


@action("noop")
def noop(ctx: ActionContext) -> None:
    """Do nothing; the step's output is null."""
    return None


@action("echo")
def echo(ctx: ActionContext) -> Any:
    """Return the step's `args`, or the run's input when the step has none."""
    return ctx.input if ctx.args is None else ctx.args


@action("fail")
def fail(ctx: ActionContext) -> None:
    """Always fail, with `args.message` if given."""
    message = ctx.args.get("message") if isinstance(ctx.args, dict) else None
    raise ActionError(str(message or "the 'fail' action always fails"))


@action("sleep")
def sleep(ctx: ActionContext) -> dict[str, float]:
    """Sleep `args.seconds` (default 1, capped at SLEEP_CAP_SECONDS) of real time."""
    raw = ctx.args.get("seconds", 1) if isinstance(ctx.args, dict) else 1
    seconds = min(max(float(raw), 0.0), SLEEP_CAP_SECONDS)
    time.sleep(seconds)
    return {"slept": seconds}
