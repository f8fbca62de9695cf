"""A trial's level algorithm, built from its `ued` settings with everything it needs checked first:
one line for each missing piece (a generator, a mutator, the agent's value estimates, the env's
success signal), for levels that do not fit the env's task, and for settings the algorithm refuses
in this run, all before anything compiles. Settings that work but will not do what they say (a
buffer that cannot fill in the run's budget) are a `LevelSettingsWarning`."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.imports import resolve_import
from ajax_tune.ued.algorithm import ROW_PREFIX, LevelAlgorithm, LevelSettings, LevelTools, RunShape
from ajax_tune.ued.registry import resolve_algorithm


class LevelSettingsWarning(UserWarning):
    """Level-algorithm settings that run, but cannot do what they say in this run."""


def make_level_algorithm(
    env, agent, settings: LevelSettings, run: RunShape, evaluate_factory: Callable[[int], Callable]
) -> LevelAlgorithm:
    """The algorithm `settings` names, over `env`'s levels, for `agent`'s envs. `evaluate_factory
    (episodes)` makes the sampling policy's evaluation on one level, for algorithms that score
    candidates by playing them (SFL)."""
    cls = resolve_algorithm(settings.algorithm)
    needs = cls.needs(settings)
    name = settings.algorithm
    generate = _level_function(settings.generator, env, "generator", "generate_level") if needs.generator else None
    mutate = _level_function(settings.mutator, env, "mutator", "mutate_level") if needs.mutator else None
    if needs.values and not callable(getattr(agent, "value_estimates", None)):
        raise ConfigError(
            f"ued.algorithm {name!r} scores levels by the agent's value estimates; agent "
            f"{type(agent).__name__} has no value_estimates (use ppo, feed-forward or recurrent)"
        )
    if needs.success and not env.has_success:
        raise ConfigError(f"ued.algorithm {name!r} ranks levels by their success rate; env {env.name!r} reports no success")
    _check_levels(env, generate, mutate)
    for message in cls.check(settings, run):
        warnings.warn(message, LevelSettingsWarning, stacklevel=2)
    evaluate = evaluate_factory(needs.scoring_episodes) if needs.scoring_episodes else None
    return cls(settings, run.num_envs, LevelTools(generate=generate, mutate=mutate, evaluate=evaluate))


def row_keys(settings: LevelSettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The rows the algorithm `settings` names writes, and those read after the call's last update
    rather than averaged; each is checked to be under `ued/`."""
    cls = resolve_algorithm(settings.algorithm)
    rows, latest = tuple(cls.row_keys), tuple(cls.latest_keys)
    wrong = [k for k in rows if not (isinstance(k, str) and k.startswith(ROW_PREFIX))] + [k for k in latest if k not in rows]
    if wrong:
        raise ConfigError(
            f"ued.algorithm {settings.algorithm!r}: row_keys must be names under {ROW_PREFIX!r} and latest_keys some of "
            f"them; got {wrong}"
        )
    return rows, latest


def _level_function(path: str, env, option: str, method: str) -> Callable:
    if path:
        found = resolve_import(path, f"ued.{option}")
        if not callable(found):
            raise ConfigError(f"ued.{option} must name a function, got {found!r}")
        return found
    own = getattr(env, method, None)
    if not callable(own):
        what = "edit levels" if option == "mutator" else "generate levels"
        raise ConfigError(
            f"ued needs a level {option} and env {env.name!r} has none (no {method}); name one as "
            f"ued.{option}: 'module:function' ({what}: see docs/curricula.md, levels as data)"
        )
    return own


def _check_levels(env, generate: Callable | None, mutate: Callable | None) -> None:
    """The generator's and mutator's levels fit the env's task (traced, never compiled)."""
    task = env.validate_task({})
    want = {k: (tuple(np.shape(v)), np.dtype(v.dtype)) for k, v in task.items()}
    key = jax.ShapeDtypeStruct((2,), np.uint32)
    abstract = {k: jax.ShapeDtypeStruct(np.shape(v), v.dtype) for k, v in task.items()}
    makers = {
        "generator": None if generate is None else lambda: jax.eval_shape(generate, key),
        "mutator": None if mutate is None else lambda: jax.eval_shape(mutate, key, abstract, np.int32(1)),
    }
    for who, make in makers.items():
        if make is None:
            continue
        try:
            level = make()
        except Exception as exc:  # a function that cannot be traced on this env's levels
            raise ConfigError(f"ued.{who}: could not build a level of env {env.name!r} ({type(exc).__name__}: {exc})") from None
        got = {k: (tuple(v.shape), np.dtype(v.dtype)) for k, v in dict(level).items()} if isinstance(level, dict) else None
        if got != want:
            raise ConfigError(
                f"ued.{who}: its levels do not fit env {env.name!r}'s task: got {_describe(got)}, expected {_describe(want)}"
            )


def _describe(fields: dict | None) -> str:
    if fields is None:
        return "not a mapping of task fields"
    return "{" + ", ".join(f"{k}: {d.name}{list(s)}" for k, (s, d) in fields.items()) + "}"
