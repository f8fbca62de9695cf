"""Envs by name: built-ins, registered names, `brax/<name>`, `gymnax/<id>`, `jaxued/maze` (or
`jaxued/<module>:<factory>`, a JaxUED underspecified env), or an import path.

An import path, "module:factory", names a callable that returns an `Env`; a Tune worker imports
it by itself, so a user's env needs no `register` call there. `register` remains for names
used within one process (a notebook, a script that trains without Tune).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ajax_tune.envs.base import Env
from ajax_tune.errors import ConfigError
from ajax_tune.imports import Registry, is_import_path

BRAX_PREFIX = "brax/"
GYMNAX_PREFIX = "gymnax/"
JAXUED_PREFIX = "jaxued/"


def _brax(name: str) -> Callable[..., Env]:
    from ajax_tune.envs.brax_adapter import BraxEnv

    return functools.partial(BraxEnv, name)


def _gymnax(env_id: str) -> Callable[..., Env]:
    try:
        from ajax_tune.envs.gymnax_adapter import GymnaxEnv
    except ImportError as exc:
        raise ImportError(f"{GYMNAX_PREFIX}{env_id} needs gymnax ({exc}); pip install 'ajax-tune[gymnax]'") from None
    return functools.partial(GymnaxEnv, env_id)


def _jaxued(rest: str) -> Callable[..., Env]:
    from ajax_tune.envs.jaxued_adapter import make

    return make(rest)


# built-ins as import paths, imported when first named
ENVS = Registry(
    "env.name",
    {
        "cartpole": "ajax_tune.envs.cartpole:CartPole",
        "pendulum": "ajax_tune.envs.pendulum:Pendulum",
        "corridor": "ajax_tune.envs.corridor:Corridor",
        "point_reach": "ajax_tune.envs.point_reach:PointReach",
        "tmaze": "ajax_tune.envs.tmaze:TMaze",
    },
    imports="module:factory",
    unknown="unknown env",
    prefixes={f"{BRAX_PREFIX}<name>": _brax, f"{GYMNAX_PREFIX}<id>": _gymnax, f"{JAXUED_PREFIX}<name>": _jaxued},
)


def register(name: str, factory: Callable[..., Env], *, overwrite: bool = False) -> None:
    """Make `make_env(name, **kwargs)` call `factory(**kwargs)` in this process."""
    if not overwrite and name in ENVS.entries:
        raise ValueError(f"an env named {name!r} is already registered; pass overwrite=True to replace it")
    if is_import_path(name) or name.startswith((BRAX_PREFIX, GYMNAX_PREFIX, JAXUED_PREFIX)):
        raise ValueError(
            f"{name!r} cannot be registered: ':' marks an import path, and the brax/, gymnax/ and jaxued/ prefixes are taken"
        )
    ENVS.entries[name] = factory


def registered_envs() -> list[str]:
    return sorted(ENVS.entries) + [form for form, _ in ENVS.prefixes.values()] + [ENVS.imports]


def make_env(name: str, **kwargs) -> Env:
    """Build an env by name: a built-in, a registered one, `brax/<name>`, `gymnax/<id>`,
    `jaxued/maze`, `jaxued/<module>:<factory>` or "module:factory" (a callable returning an `Env`)."""
    factory = ENVS.resolve(name)
    if not ENVS.is_import_path(name):
        return factory(**kwargs)
    if not callable(factory):
        raise ConfigError(f"env.name {name!r} must name a callable that returns an Env, got {factory!r}")
    env = factory(**kwargs)
    if not isinstance(env, Env):
        raise ConfigError(f"env.name {name!r} must return an ajax_tune.envs.Env, got {type(env).__name__}")
    return env
