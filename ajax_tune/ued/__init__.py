"""Levels as data, and the algorithms that choose them every rollout inside the compiled program
(unsupervised environment design): domain randomisation, prioritised level replay (PLR), robust
PLR, ACCEL and SFL.

    config.py   the `ued` section of a trial config
    buffer.py   a level buffer with scores and staleness, as pure functions
    scores.py   positive value loss, MaxMC, learnability
    decider.py  the per-rollout decision, and what the program does with a rollout's scores
"""

from __future__ import annotations

from collections.abc import Callable

from ajax_tune.errors import ConfigError
from ajax_tune.imports import resolve_import
from ajax_tune.ued.config import UEDConfig
from ajax_tune.ued.decider import Decider

__all__ = ["Decider", "UEDConfig", "build_decider"]


def build_decider(env, agent, config: UEDConfig, evaluate_factory: Callable) -> Decider:
    """The decider of a trial's `ued` section, every piece it needs checked first (one line
    each, before anything compiles). `evaluate_factory(episodes)` builds SFL's evaluation."""
    generate = _level_function(config.generator, getattr(env, "generate_level", None), "generator", "generate_level", env)
    mutate = None
    if config.algorithm == "accel":
        mutate = _level_function(config.mutator, getattr(env, "mutate_level", None), "mutator", "mutate_level", env)
    if config.prioritised and not callable(getattr(agent, "value_estimates", None)):
        raise ConfigError(
            f"ued.algorithm {config.algorithm!r} scores levels by the agent's value estimates; agent "
            f"{type(agent).__name__} has no value_estimates (use ppo, feed-forward or recurrent)"
        )
    if config.prioritised and config.buffer_size < agent.num_envs:
        raise ConfigError(
            f"ued.buffer_size ({config.buffer_size}) is smaller than a batch of levels (agent.num_envs = "
            f"{agent.num_envs}): the buffer must hold at least one rollout's levels"
        )
    _check_levels(env, generate, mutate)
    evaluate = None
    if config.algorithm == "sfl":
        if not env.has_success:
            raise ConfigError(f"ued.algorithm 'sfl' ranks levels by their success rate; env {env.name!r} reports no success")
        evaluate = evaluate_factory(config.sfl_rollouts)
    return Decider(config, agent.num_envs, generate, mutate, evaluate)


def _check_levels(env, generate: Callable, mutate: Callable | None) -> None:
    """The generator's and mutator's levels fit the env's task (traced, never compiled)."""
    import jax
    import numpy as np

    task = env.validate_task({})
    want = {k: (tuple(np.shape(v)), np.dtype(v.dtype)) for k, v in task.items()}
    key = jax.ShapeDtypeStruct((2,), np.uint32)
    for who, make in (("generator", lambda: jax.eval_shape(generate, key)), ("mutator", lambda: _mutated(mutate, key, task))):
        if who == "mutator" and mutate is None:
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


def _mutated(mutate: Callable, key, task: dict):
    import jax
    import numpy as np

    return jax.eval_shape(mutate, key, {k: jax.ShapeDtypeStruct(np.shape(v), v.dtype) for k, v in task.items()}, np.int32(1))


def _describe(fields: dict | None) -> str:
    if fields is None:
        return "not a mapping of task fields"
    return "{" + ", ".join(f"{k}: {d.name}{list(s)}" for k, (s, d) in fields.items()) + "}"


def _level_function(path: str, own, option: str, method: str, env) -> Callable:
    if path:
        found = resolve_import(path, f"ued.{option}")
        if not callable(found):
            raise ConfigError(f"ued.{option} must name a function, got {found!r}")
        return found
    if not callable(own):
        what = "edit levels" if option == "mutator" else "generate levels"
        raise ConfigError(
            f"ued needs a level {option} and env {env.name!r} has none (no {method}); name one as "
            f"ued.{option}: 'module:function' ({what}: see docs/curricula.md, levels)"
        )
    return own
