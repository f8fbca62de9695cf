"""Envs by name: built-ins, registered names, a suite's `<suite>/<id>` (one table, `SUITES`:
brax, gymnax, jaxued (`jaxued/maze` or `jaxued/<module>:<factory>`, a JaxUED underspecified
env), xminigrid, craftax, navix, kinetix, playground, jumanji), or an import path.

An import path, "module:factory", names a callable that returns an `Env`; a Tune worker imports
it by itself, so a user's env needs no `register` call there. `register` remains for names
used within one process (a notebook, a script that trains without Tune).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ajax_tune.envs.base import Env, check_kwargs
from ajax_tune.envs.suite import Suite
from ajax_tune.errors import ConfigError
from ajax_tune.imports import Registry, is_import_path

#: Env suites by prefix: the adapter taking the rest of the name, the module the suite installs
#: and how to install it. A suite missing is one line naming its extra.
SUITES = {
    "brax/": Suite(
        "ajax_tune.envs.brax_adapter:BraxEnv", "brax", "brax is a dependency of ajax-tune: pip install ajax-tune", "<name>"
    ),
    "gymnax/": Suite("ajax_tune.envs.gymnax_adapter:GymnaxEnv", "gymnax", "pip install 'ajax-tune[gymnax]'"),
    "jaxued/": Suite("ajax_tune.envs.jaxued_adapter:by_name", "jaxued", "pip install 'ajax-tune[ued]'", "<name>"),
    "xminigrid/": Suite("ajax_tune.envs.xminigrid_adapter:XMiniGridEnv", "xminigrid", "pip install 'ajax-tune[xminigrid]'"),
    "craftax/": Suite("ajax_tune.envs.craftax_adapter:CraftaxEnv", "craftax", "pip install 'ajax-tune[craftax]'"),
    "navix/": Suite("ajax_tune.envs.navix_adapter:NavixEnv", "navix", "pip install 'ajax-tune[navix]'"),
    "kinetix/": Suite(
        "ajax_tune.envs.kinetix_adapter:KinetixEnv",
        "kinetix",
        # kinetix-env pins jax<=0.9 and jax2d 1.0.1 (which fails on jax 0.10): installed without its pins
        "pip install 'ajax-tune[kinetix]' && pip install --no-deps kinetix-env==3.0.2 jax2d==1.0.2",
        "<level>",
    ),
    "playground/": Suite(
        "ajax_tune.envs.playground_adapter:PlaygroundEnv", "mujoco_playground", "pip install 'ajax-tune[playground]'"
    ),
    "jumanji/": Suite("ajax_tune.envs.jumanji_adapter:JumanjiEnv", "jumanji", "pip install 'ajax-tune[jumanji]'"),
}

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
    prefixes={f"{prefix}{suite.form}": functools.partial(suite.factory, prefix) for prefix, suite in SUITES.items()},
)


def register(name: str, factory: Callable[..., Env], *, overwrite: bool = False) -> None:
    """Make `make_env(name, **kwargs)` call `factory(**kwargs)` in this process."""
    if not overwrite and name in ENVS.entries:
        raise ValueError(f"an env named {name!r} is already registered; pass overwrite=True to replace it")
    if is_import_path(name) or name.startswith(tuple(SUITES)):
        taken = ", ".join(SUITES)
        raise ValueError(f"{name!r} cannot be registered: ':' marks an import path, and these prefixes are taken: {taken}")
    ENVS.entries[name] = factory


def registered_envs() -> list[str]:
    return sorted(ENVS.entries) + [form for form, _ in ENVS.prefixes.values()] + [ENVS.imports]


def make_env(name: str, **kwargs) -> Env:
    """Build an env by name: a built-in, a registered one, a suite's (`brax/<name>`, `gymnax/<id>`,
    `jaxued/maze`, ...) or "module:factory" (a callable returning an `Env`)."""
    factory = ENVS.resolve(name)
    imported = ENVS.is_import_path(name)
    if imported and not callable(factory):
        raise ConfigError(f"env.name {name!r} must name a callable that returns an Env, got {factory!r}")
    check_kwargs(name, factory, kwargs)
    env = factory(**kwargs)
    if imported and not isinstance(env, Env):
        raise ConfigError(f"env.name {name!r} must return an ajax_tune.envs.Env, got {type(env).__name__}")
    return env
