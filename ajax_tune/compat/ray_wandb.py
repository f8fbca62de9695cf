"""Ray's W&B callback internals that `tune/wandb_logging.py` changes: env steps as the x-axis, rows
never dropped after a PBT rewind. Ray offers no hook for that, so it subclasses the logging actor
and overrides the callback's actor start; these functions are every point where it touches them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ajax_tune.compat.base import gone, private

__all__ = [
    "WANDB_ACTOR_CLASS_ATTR",
    "WANDB_START_ACTOR_METHOD",
    "set_wandb_actor_module",
    "start_wandb_actor",
    "use_wandb_actor",
    "wandb_actor_module",
    "wandb_callback_has_actor",
    "wandb_clean_config",
    "wandb_logging_actor",
    "wandb_queue_item",
]

#: the `WandbLoggerCallback` class attribute naming its logging actor class, and the method that
#: starts an actor for a trial, `(self, trial, exclude_results, **init_kwargs)`.
WANDB_ACTOR_CLASS_ATTR = "_logger_actor_cls"
WANDB_START_ACTOR_METHOD = "_start_logging_actor"


def wandb_logging_actor() -> type:
    """Ray's W&B logging actor class (`_WandbLoggingActor`): it runs `wandb.init` and logs each
    queued result with `self._wandb`, which a subclass may replace after `__init__`."""
    return private("ray.air.integrations.wandb", "_WandbLoggingActor", "ray")


def wandb_actor_module(actor: Any) -> Any:
    """The `wandb` module a logging actor calls (its `_wandb`)."""
    if not hasattr(actor, "_wandb"):
        raise gone("the W&B logging actor's `_wandb`", "ray")
    return actor._wandb  # noqa: SLF001


def set_wandb_actor_module(actor: Any, module: Any) -> None:
    """Make a logging actor call `module` instead of `wandb`."""
    wandb_actor_module(actor)  # checks the attribute is still there
    actor._wandb = module  # noqa: SLF001


def use_wandb_actor(callback_cls: type, actor_cls: type, start_actor: Callable) -> None:
    """Make a `WandbLoggerCallback` subclass start `actor_cls` as its logging actor, through
    `start_actor(self, trial, exclude_results, **init_kwargs)` (which may hand on to Ray's own
    with `start_wandb_actor`)."""
    for attr in (WANDB_ACTOR_CLASS_ATTR, WANDB_START_ACTOR_METHOD):
        if not hasattr(callback_cls, attr):
            raise gone(f"WandbLoggerCallback.{attr}", "ray")
    setattr(callback_cls, WANDB_ACTOR_CLASS_ATTR, actor_cls)
    setattr(callback_cls, WANDB_START_ACTOR_METHOD, start_actor)


def start_wandb_actor(parent: Any, trial: Any, exclude_results: list, **init_kwargs: Any) -> None:
    """Ray's own actor start for `trial`, called on `parent` (a `super()` of the callback)."""
    getattr(parent, WANDB_START_ACTOR_METHOD)(trial, exclude_results, **init_kwargs)


def wandb_clean_config(value: Any) -> Any:
    """A config value made loggable the way Ray's callback does it (`_clean_log`)."""
    return private("ray.air.integrations.wandb", "_clean_log", "ray")(value)


def wandb_callback_has_actor(callback: Any, trial: Any) -> bool:
    """Whether a `WandbLoggerCallback` has started a logging actor for `trial`."""
    futures = getattr(callback, "_trial_logging_futures", None)
    if not isinstance(futures, dict):
        raise gone("WandbLoggerCallback._trial_logging_futures", "ray")
    return trial in futures


def wandb_queue_item(kind: str) -> Any:
    """The marker of a `RESULT`, `CHECKPOINT` or `END` item on a logging actor's queue
    (`_QueueItem`); what the callback puts there, e.g. for driving an actor in a test."""
    try:
        return private("ray.air.integrations.wandb", "_QueueItem", "ray")[kind]
    except KeyError as exc:
        raise gone(f"ray.air.integrations.wandb._QueueItem.{kind}", "ray", exc) from None
