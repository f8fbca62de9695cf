"""Craftax by name: `craftax/<id>`, symbolic observations, its step's `EnvParams` as the task,
resets drawn from a pool of start worlds, and a new task that changes data, not the program."""

import numpy as np
import pytest

from tests.support.helpers import host, import_extra
from tests.support.suites import assert_task_changes_behaviour, episode_rollout, gymnasium_check, refused, smoke, step_keys, tiny

import_extra("craftax", extra="craftax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ajax_tune.envs import EpisodeWrapper, make_env  # noqa: E402

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
        ({"name": CLASSIC, "kwargs": {"start_states": 2.5}}, "start_states must be an integer >= 0"),
        ({"name": CLASSIC, "kwargs": {"max_episode_steps": 0}}, "max_episode_steps must be an integer >= 1, got 0"),
    ],
)
def test_bad_input_is_one_line_before_compiling(env, message):
    refused(tiny(env), message)


LIMIT = 3
NOOP = 0


@pytest.fixture(scope="module")
def classic():
    """Classic under a 3-step limit (a fresh world at every reset), its rollouts, and one step of
    it beside one step of craftax's own `step_env` (its time limit as given) from the same state."""
    env = make_env(CLASSIC, max_episode_steps=LIMIT, start_states=0)
    wrapped, own = EpisodeWrapper(env), env.craftax_env

    @jax.jit
    def beside(state, action, key, limit):
        return wrapped.step(state, action, key), own.step_env(
            key, state.physics, action, own.default_params.replace(max_timesteps=limit)
        )

    return env, episode_rollout(env), beside


@pytest.mark.heavy
def test_a_new_task_changes_how_the_world_steps(classic):
    """A 30-step day instead of a 300-step one, the same keys and no-ops: the light level in the
    observation (its second-to-last value) differs from the first step on, in one program."""
    env, run, _ = classic
    (_, day), (_, short_day) = assert_task_changes_behaviour(run, {}, {"day_length": 30}, jnp.zeros(LIMIT, jnp.int32))
    light = env.observation_space.shape[0] - 2
    assert (np.flatnonzero(day.obs[0] != short_day.obs[0]) == [light]).all()


@pytest.mark.heavy
def test_episodes_end_as_craftaxs_own_step_says(classic):
    """Death (craftax: done at its step, under its own 10,000-step limit) is `terminated`; the
    time limit, which craftax folds into `done`, is `truncated`, keeping craftax's final
    observation to bootstrap from."""
    env, run, beside = classic
    first, idle = run({}, jnp.zeros(LIMIT, jnp.int32))
    _, keys = step_keys(0, LIMIT)
    dying = jax.tree.map(jnp.asarray, first)
    dying = dying.replace(physics=dying.physics.replace(player_health=jnp.int32(0)))
    ours, (_, _, _, done, _) = host(beside(dying, jnp.int32(NOOP), keys[0], 10_000))
    assert bool(done) and bool(ours.terminated) and not bool(ours.truncated)

    assert idle.truncated.tolist() == [False] * (LIMIT - 1) + [True] and not idle.terminated.any()
    ours, (obs, _, _, done, _) = host(beside(jax.tree.map(lambda x: x[LIMIT - 2], idle), jnp.int32(NOOP), keys[-1], LIMIT))
    assert bool(done) and bool(ours.truncated) and not bool(ours.terminated)
    np.testing.assert_array_equal(idle.obs[-1], np.asarray(obs, np.float32).reshape(-1))


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
