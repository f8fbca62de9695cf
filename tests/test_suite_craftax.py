"""Craftax by name: `craftax/<id>`, symbolic observations, its step's `EnvParams` as the task,
resets drawn from a pool of start worlds, and a new task that changes data, not the program."""

import numpy as np
import pytest

from tests.support.helpers import import_extra
from tests.support.suites import gymnasium_check, refused, smoke, tiny

import_extra("craftax", extra="craftax")

from ajax_tune.envs import make_env  # noqa: E402

CLASSIC = "craftax/Craftax-Classic-Symbolic-v1"


def test_the_step_parameters_are_the_task():
    env = make_env(CLASSIC)
    assert {"day_length", "zombie_health", "spawn_zombie_night_chance"} <= set(env.task_spec)
    assert "max_timesteps" not in env.task_spec and env.max_episode_steps == 10_000  # the wrapper's time limit
    chance = env.task_spec["spawn_cow_chance"]
    assert (chance.low, chance.high, chance.default) == (0.0, 1.0, pytest.approx(0.1))
    assert env.observation_space.shape == (1345,) and env.action_space.n == 17 and env.image_shape == (7, 9, 21)
    assert make_env("craftax/Craftax-Symbolic-v1").observation_space.shape == (8268,)


@pytest.mark.parametrize(
    "env, message",
    [
        ({"name": "craftax/Craftax-Classic-Symbolic-v2"}, "did you mean 'craftax/Craftax-Classic-Symbolic-v1'"),
        (
            {"name": "craftax/Craftax-Classic-Pixels-v1"},
            "pixel observations are not offered; use craftax/Craftax-Classic-Symbolic-v1",
        ),
        (
            {"name": CLASSIC, "task": {"spawn_cow_chance": 2.0}},
            r"task field 'spawn_cow_chance' expected float scalar in \[0, 1\]",
        ),
        ({"name": CLASSIC, "task": {"always_diamond": 1}}, "unknown task field"),
        ({"name": CLASSIC, "kwargs": {"start_states": -1}}, "start_states must be an integer >= 0"),
    ],
)
def test_bad_input_is_one_line_before_compiling(env, message):
    refused(tiny(env), message)


@pytest.mark.slow
def test_trains_saves_restores_and_a_new_task_does_not_recompile(tmp_path):
    config = tiny({"name": CLASSIC, "kwargs": {"start_states": 8}})
    runner = smoke(config, tmp_path, new_task={"spawn_zombie_base_chance": 0.5, "zombie_health": 2})
    assert runner.get_task()["zombie_health"] == 2
    assert len(runner.env.pool().map) == 8  # the resets' start worlds, made once


@pytest.mark.slow
def test_passes_gymnasiums_checker():
    gymnasium_check(CLASSIC, start_states=4)


@pytest.mark.slow
def test_a_fresh_world_at_every_reset_without_a_pool():
    import jax

    env = make_env(CLASSIC, start_states=0)
    task = {k: jax.numpy.asarray(v) for k, v in env.default_task().items()}
    a, b = (jax.jit(env.reset)(jax.random.PRNGKey(seed), task).physics.map for seed in (0, 1))
    assert not np.array_equal(a, b)
