"""What every env suite's tests check (tests/test_suite_*.py): a Runner builds, trains two calls,
saves, and restores a call's start that it then replays exactly, and a new task (where
the suite has tasks) changes data, not the program, and the env's behaviour, not only what
`get_task()` reads back; the env exported to gymnasium passes its checker."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.base import task_to_jax
from ajax_tune.envs.gymnasium_adapter import as_gymnasium
from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.runner import Runner
from tests.support.helpers import assert_trees_equal, host, programs_built

#: the smallest PPO that trains: 4 envs, unrolls of 8, two updates a call
TINY = {
    "agent": {"num_envs": 4, "unroll_length": 8, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]},
    "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 4 * 8 * 2, "num_seeds": 1, "eval_episodes": 1},
}


def tiny(env: dict, **sections) -> dict:
    return {"env": env, **TINY, **sections}


def refused(config: dict, message: str) -> None:
    """`config` is refused in one line matching `message` (a ConfigError, or the TaskError of a
    starting task that does not fit) by `Runner.check`, and by `Runner(config)` before any program
    is lowered or compiled. (A suite's constructor may run small JAX operations of its own, each
    compiled on first use: `Runner.check` runs them once first.)"""
    with pytest.raises((ConfigError, TaskError), match=message) as info:
        Runner.check(config)
    assert "\n" not in str(info.value), str(info.value)
    with programs_built() as built, pytest.raises((ConfigError, TaskError), match=message):
        Runner(config)
    assert built == [], f"refused only after building: {built}"


def smoke(config: dict, tmp_path, new_task=None) -> Runner:
    """Two calls (a new task set between them, if given), a save, a third call, and a restore of
    the save that replays the third call bit-exactly; one compilation throughout. The restore goes
    into the same Runner (a suite's program takes up to a minute to build on a CPU; a fresh
    Runner restoring a checkpoint is tested in every agent's split-run test): whatever the
    checkpoint missed would make the replay differ."""
    runner = Runner(config, trial_id="t")
    first = runner.train()
    if new_task is not None:
        before = runner.get_task()
        runner.set_task(new_task)
        assert any(not np.array_equal(before[k], v) for k, v in runner.get_task().items()), "the new task is the old one"
    second = runner.train()
    assert second["env_steps"] == 2 * first["env_steps"] > 0
    assert second["train/nonfinite"] == 0 and np.isfinite(
        second["train/episode_return_mean"] if second["train/episodes"] else 0.0
    )
    assert second["perf/compilations"] == 1, "a new task recompiled" if new_task is not None else "recompiled"

    saved = host(runner.state)
    runner.save(tmp_path / "ck")
    third = runner.train()
    after = host(runner.state)
    runner.restore(tmp_path / "ck")
    assert_trees_equal(runner.state, saved)
    again = runner.train()
    assert third["env_steps"] == again["env_steps"] == 3 * first["env_steps"]
    assert_trees_equal(runner.state, after)
    assert again["perf/compilations"] == 1
    return runner


def episode_rollout(env, max_episode_steps: int | None = None, seed: int = 0):
    """`run(task, actions)`: `env`, episode-wrapped, reset on `task` and stepped through `actions`
    (one per step, stacked) with keys drawn from `seed`; the first state and the states after
    each step, on the host. One program for every task and every action sequence of one length."""
    wrapped = EpisodeWrapper(env, max_episode_steps)

    @jax.jit
    def rollout(task, actions):
        reset_key, step_key = jax.random.split(jax.random.PRNGKey(seed))

        def step(state, xs):
            action, key = xs
            state = wrapped.step(state, action, key)
            return state, state

        first = wrapped.reset(reset_key, task)
        keys = jax.random.split(step_key, len(jax.tree.leaves(actions)[0]))
        return first, jax.lax.scan(step, first, (actions, keys))[1]

    def run(task, actions):
        return host(rollout(task_to_jax(env.validate_task(task)), actions))

    run.program = rollout
    return run


def step_keys(seed: int, steps: int):
    """The reset key and the step keys `episode_rollout(..., seed)` uses, to step a suite's own
    env beside it."""
    reset_key, step_key = jax.random.split(jax.random.PRNGKey(seed))
    return reset_key, jax.random.split(step_key, steps)


def assert_task_changes_behaviour(run, task_a, task_b, actions):
    """The same keys and actions under `task_a` and `task_b` give another trajectory (an
    observation, a reward or an episode's end differs), in one program (`run` is an
    `episode_rollout`): a new task reaches the env's dynamics, not only what `get_task()` reads
    back. An adapter that ignored its task would step both alike. Returns both trajectories
    (first state, states after each step)."""
    a, b = run(task_a, actions), run(task_b, actions)
    assert jit_cache_size(run.program) == 1, "a new task recompiled"
    differs = [
        name
        for name in ("obs", "reward", "terminated", "truncated")
        if not all(np.array_equal(getattr(x, name), getattr(y, name)) for x, y in zip(a, b))
    ]
    assert differs, "two tasks gave the same trajectory: the task does not reach the dynamics"
    return a, b


def gymnasium_check(name: str, **kwargs) -> None:
    """`as_gymnasium(env)` passes gymnasium's `check_env`, and its checker warns of nothing but
    unbounded observations (a physics state has no bounds)."""
    from gymnasium.utils.env_checker import check_env

    env = as_gymnasium(make_env(name, **kwargs), seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    complaints = [str(w.message) for w in caught if "WARN" in str(w.message) and "infinity" not in str(w.message)]
    assert complaints == [], complaints


def write_rulesets(path) -> str:
    """A small XLand ruleset benchmark in xminigrid's file format (what `load_benchmark_from_path`
    reads), made here so that no test downloads one: three rulesets of up to one rule and three
    tiles. Returns the path."""
    from xminigrid.benchmarks import save_bz2_pickle
    from xminigrid.core.constants import Colors, Tiles
    from xminigrid.core.goals import AgentHoldGoal, AgentNearGoal
    from xminigrid.core.rules import AgentHoldRule, EmptyRule, TileNearRule

    def tile(kind, colour):
        return np.asarray([kind, colour], np.uint8)

    empty_rule, empty_tile = np.asarray(EmptyRule().encode()), tile(Tiles.EMPTY, Colors.EMPTY)
    rulesets = [
        (AgentNearGoal(tile=tile(Tiles.BALL, Colors.RED)), [], [tile(Tiles.BALL, Colors.RED)]),
        (
            AgentHoldGoal(tile=tile(Tiles.SQUARE, Colors.BLUE)),
            [AgentHoldRule(tile=tile(Tiles.BALL, Colors.GREEN), prod_tile=tile(Tiles.SQUARE, Colors.BLUE))],
            [tile(Tiles.BALL, Colors.GREEN), tile(Tiles.PYRAMID, Colors.YELLOW)],
        ),
        (
            AgentHoldGoal(tile=tile(Tiles.STAR, Colors.PINK)),
            [
                TileNearRule(
                    tile_a=tile(Tiles.BALL, Colors.RED),
                    tile_b=tile(Tiles.KEY, Colors.RED),
                    prod_tile=tile(Tiles.STAR, Colors.PINK),
                )
            ],
            [tile(Tiles.BALL, Colors.RED), tile(Tiles.KEY, Colors.RED), tile(Tiles.HEX, Colors.GREEN)],
        ),
    ]

    def padded(rows, count, filler):
        return np.stack([np.asarray(r) for r in rows] + [filler] * (count - len(rows)))

    save_bz2_pickle(
        {
            "goals": np.stack([np.asarray(goal.encode()) for goal, _, _ in rulesets]),
            "rules": np.stack([padded([r.encode() for r in rules], 1, empty_rule) for _, rules, _ in rulesets]),
            "init_tiles": np.stack([padded(tiles, 3, empty_tile) for _, _, tiles in rulesets]),
            "num_rules": np.asarray([len(rules) for _, rules, _ in rulesets]),
        },
        str(path),
    )
    return str(path)
