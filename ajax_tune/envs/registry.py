"""Envs by name: built-ins, registered names, `brax/<name>`, `gymnax/<id>`, `jaxued/maze` (or
`jaxued/<module>:<factory>`, a JaxUED underspecified env), a suite's `<suite>/<id>` (xminigrid,
craftax, navix, kinetix, playground, jumanji), or an import path.

An import path, "module:factory", names a callable that returns an `Env`; a Tune worker imports
it by itself, so a user's env needs no `register` call there. `register` remains for names
used within one process (a notebook, a script that trains without Tune).
"""

from __future__ import annotations

import functools
import importlib
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


#: Env suites by prefix: the adapter (module, class, called with the rest of the name) and how
#: to install what it needs. A suite missing is one line naming its extra.
SUITES = {
    "xminigrid/": ("ajax_tune.envs.xminigrid_adapter", "XMiniGridEnv", "pip install 'ajax-tune[xminigrid]'"),
    "craftax/": ("ajax_tune.envs.craftax_adapter", "CraftaxEnv", "pip install 'ajax-tune[craftax]'"),
    "navix/": ("ajax_tune.envs.navix_adapter", "NavixEnv", "pip install 'ajax-tune[navix]'"),
    "kinetix/": (
        "ajax_tune.envs.kinetix_adapter",
        "KinetixEnv",
        # kinetix-env pins jax<=0.9 and jax2d 1.0.1 (which fails on jax 0.10): installed without its pins
        "pip install 'ajax-tune[kinetix]' && pip install --no-deps kinetix-env==3.0.2 jax2d==1.0.2",
    ),
    "playground/": ("ajax_tune.envs.playground_adapter", "PlaygroundEnv", "pip install 'ajax-tune[playground]'"),
    "jumanji/": ("ajax_tune.envs.jumanji_adapter", "JumanjiEnv", "pip install 'ajax-tune[jumanji]'"),
}


def _suite(prefix: str) -> Callable[[str], Callable[..., Env]]:
    module_name, class_name, install = SUITES[prefix]

    def factory(env_id: str) -> Callable[..., Env]:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(f"{prefix}{env_id} needs the {prefix[:-1]} suite ({exc}); {install}") from None
        return functools.partial(getattr(module, class_name), env_id)

    return factory


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
    prefixes={
        f"{BRAX_PREFIX}<name>": _brax,
        f"{GYMNAX_PREFIX}<id>": _gymnax,
        f"{JAXUED_PREFIX}<name>": _jaxued,
        **{f"{prefix}<{'level' if prefix == 'kinetix/' else 'id'}>": _suite(prefix) for prefix in SUITES},
    },
)


def register(name: str, factory: Callable[..., Env], *, overwrite: bool = False) -> None:
    """Make `make_env(name, **kwargs)` call `factory(**kwargs)` in this process."""
    if not overwrite and name in ENVS.entries:
        raise ValueError(f"an env named {name!r} is already registered; pass overwrite=True to replace it")
    if is_import_path(name) or name.startswith((BRAX_PREFIX, GYMNAX_PREFIX, JAXUED_PREFIX, *SUITES)):
        taken = ", ".join([BRAX_PREFIX, GYMNAX_PREFIX, JAXUED_PREFIX, *SUITES])
        raise ValueError(f"{name!r} cannot be registered: ':' marks an import path, and these prefixes are taken: {taken}")
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
