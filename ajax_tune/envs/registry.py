"""Envs by name: built-ins, registered names, `brax/<name>`, `gymnax/<id>`, or an import path.

An import path, "module:factory", names a callable that returns an `Env`; a Tune worker imports
it by itself, so a user's env needs no `register` call there. `register` remains for names
used within one process (a notebook, a script that trains without Tune).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable

from ajax_tune.envs.base import Env
from ajax_tune.errors import ConfigError
from ajax_tune.imports import is_import_path, resolve_import

_FACTORIES: dict[str, Callable[..., Env]] = {}
_BUILTINS = {
    "cartpole": "ajax_tune.envs.cartpole:CartPole",
    "pendulum": "ajax_tune.envs.pendulum:Pendulum",
    "corridor": "ajax_tune.envs.corridor:Corridor",
    "point_reach": "ajax_tune.envs.point_reach:PointReach",
}
BRAX_PREFIX = "brax/"
GYMNAX_PREFIX = "gymnax/"


def register(name: str, factory: Callable[..., Env], *, overwrite: bool = False) -> None:
    """Make `make_env(name, **kwargs)` call `factory(**kwargs)` in this process."""
    if not overwrite and (name in _FACTORIES or name in _BUILTINS):
        raise ValueError(f"an env named {name!r} is already registered; pass overwrite=True to replace it")
    if is_import_path(name) or name.startswith((BRAX_PREFIX, GYMNAX_PREFIX)):
        raise ValueError(f"{name!r} cannot be registered: ':' marks an import path, and the brax/ and gymnax/ "
                         f"prefixes are taken")
    _FACTORIES[name] = factory


def registered_envs() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTINS)) + [BRAX_PREFIX + "<name>", GYMNAX_PREFIX + "<id>",
                                                        "module:factory"]


def make_env(name: str, **kwargs) -> Env:
    """Build an env by name: a built-in, a registered one, `brax/<name>`, `gymnax/<id>` or
    "module:factory" (a callable returning an `Env`)."""
    if name in _FACTORIES:
        return _FACTORIES[name](**kwargs)
    if name in _BUILTINS:
        module, attr = _BUILTINS[name].split(":")
        return getattr(importlib.import_module(module), attr)(**kwargs)
    if name.startswith(BRAX_PREFIX):
        from ajax_tune.envs.brax_adapter import BraxEnv

        return BraxEnv(name[len(BRAX_PREFIX):], **kwargs)
    if name.startswith(GYMNAX_PREFIX):
        try:
            from ajax_tune.envs.gymnax_adapter import GymnaxEnv
        except ImportError as exc:
            raise ImportError(f"{name} needs gymnax ({exc}); pip install 'ajax-tune[gymnax]'") from None
        return GymnaxEnv(name[len(GYMNAX_PREFIX):], **kwargs)
    if is_import_path(name):
        factory = resolve_import(name, "env.name")
        if not callable(factory):
            raise ConfigError(f"env.name {name!r} must name a callable that returns an Env, got {factory!r}")
        env = factory(**kwargs)
        if not isinstance(env, Env):
            raise ConfigError(f"env.name {name!r} must return an ajax_tune.envs.Env, got {type(env).__name__}")
        return env
    close = difflib.get_close_matches(name, registered_envs(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise KeyError(f"unknown env {name!r}{hint} Known envs: {', '.join(registered_envs())}")
