"""User callbacks in the driver: resolved from `module:attr` names, run after each update.

A callback is a function of the update's metrics dict, or an object with any of
`on_update(metrics)`, `on_evaluation(metrics)` (on the first update whose eval/* metrics are
new) and `on_checkpoint(path)` (the final checkpoint, once the run has ended). One returning
False ends the run cleanly.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from distributed_ac.core.errors import UsageError

Hook = Callable[[dict, Callable[[], str]], "bool | None"]


def resolve(name: str) -> Any:
    """The object a `module:attr` string names; a bad name is a UsageError."""
    module, _, attr = name.partition(":")
    if not module or not attr:
        raise UsageError(f"callback '{name}': name it as module:attr")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"callback '{name}': {e}") from None


def resolved(callbacks) -> list:
    """Callbacks with each `module:attr` string replaced by the object it names."""
    return [resolve(c) if isinstance(c, str) else c for c in callbacks or ()]


def _calls(cb, row: dict, fresh: bool) -> bool:
    """Run one callback on an update's row; True if it asked to stop."""
    stop = False
    if hasattr(cb, "on_update"):
        stop |= cb.on_update(row) is False
    elif callable(cb) and not hasattr(cb, "on_evaluation"):
        stop |= cb(row) is False
    if fresh and hasattr(cb, "on_evaluation"):
        stop |= cb.on_evaluation(row) is False
    return stop


def hook_for(callbacks: list) -> Hook | None:
    """The trainer's on_update hook that runs every (resolved) callback and returns False
    if one did; None for none."""
    if not callbacks:
        return None
    seen: list = [None]

    def hook(row: dict, save: Callable[[], str]) -> bool | None:
        evaluated = {k: v for k, v in row.items() if k.startswith("eval/")}
        fresh = bool(evaluated) and evaluated != seen[0]
        seen[0] = evaluated
        stop = False
        for cb in callbacks:
            stop |= _calls(cb, row, fresh)
        return False if stop else None
    return hook


def checkpointed(callbacks: list, summary: dict) -> None:
    """Tell each callback with on_checkpoint where the run's final checkpoint is."""
    for cb in callbacks:
        if hasattr(cb, "on_checkpoint") and summary.get("checkpoint"):
            cb.on_checkpoint(summary["checkpoint"])
