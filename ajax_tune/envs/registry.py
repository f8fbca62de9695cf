"""Envs by name. Built-ins register themselves lazily; users call `register`."""

from __future__ import annotations

import difflib
import importlib
from typing import Callable

from ajax_tune.envs.base import Env

_FACTORIES: dict[str, Callable[..., Env]] = {}
_BUILTINS = {
    "cartpole": "ajax_tune.envs.cartpole:CartPole",
    "pendulum": "ajax_tune.envs.pendulum:Pendulum",
    "corridor": "ajax_tune.envs.corridor:Corridor",
    "point_reach": "ajax_tune.envs.point_reach:PointReach",
}
BRAX_PREFIX = "brax/"


def register(name: str, factory: Callable[..., Env], *, overwrite: bool = False) -> None:
    """Make `make_env(name, **kwargs)` call `factory(**kwargs)`."""
    if not overwrite and (name in _FACTORIES or name in _BUILTINS):
        raise ValueError(f"an env named {name!r} is already registered; pass overwrite=True to replace it")
    _FACTORIES[name] = factory


def registered_envs() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTINS)) + [BRAX_PREFIX + "<name>"]


def make_env(name: str, **kwargs) -> Env:
    """Build an env by name: a built-in, a registered one, or `brax/<name>`."""
    if name in _FACTORIES:
        return _FACTORIES[name](**kwargs)
    if name in _BUILTINS:
        module, attr = _BUILTINS[name].split(":")
        return getattr(importlib.import_module(module), attr)(**kwargs)
    if name.startswith(BRAX_PREFIX):
        from ajax_tune.envs.brax_adapter import BraxEnv

        return BraxEnv(name[len(BRAX_PREFIX):], **kwargs)
    close = difflib.get_close_matches(name, registered_envs(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise KeyError(f"unknown env {name!r}{hint} Known envs: {', '.join(registered_envs())}")
