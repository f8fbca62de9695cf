"""Envs that need memory: cartpole with its velocities hidden (CartPole's dynamics, half its
observation, and a gymnasium twin that hides the same) and the T-maze (a cue seen once)."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.base import task_to_jax
from ajax_tune.envs.gymnasium_adapter import SelectObservation
from ajax_tune.errors import TaskError


def rollout(env, actions, seed=0, task=None):
    state = env.reset(jax.random.PRNGKey(seed), task_to_jax(env.validate_task(task or {})))
    states = [state]
    for a in actions:
        state = env.step(state, jnp.asarray(a, jnp.int32), jax.random.PRNGKey(1))
        states.append(state)
    return states


def test_hidden_velocities_keep_cartpoles_dynamics_and_show_position_and_angle():
    actions = [1, 0, 0, 1, 1, 1, 0, 1]
    full, hidden = make_env("cartpole"), make_env("cartpole", hide_velocities=True)
    assert hidden.observation_space.shape == (2,) and full.observation_space.shape == (4,)
    for a, b in zip(rollout(full, actions), rollout(hidden, actions)):
        np.testing.assert_array_equal(a.physics, b.physics)
        np.testing.assert_array_equal(np.asarray(a.obs)[[0, 2]], b.obs)
        assert bool(a.terminated) == bool(b.terminated)
    assert full.gymnasium_wrapper() is None
    with pytest.raises(ValueError, match="hide_velocities must be true or false"):
        make_env("cartpole", hide_velocities="yes")


def test_the_gymnasium_twin_hides_the_same_entries():
    twin = make_env("cartpole", hide_velocities=True).gymnasium_wrapper()(gymnasium.make("CartPole-v1"))
    plain = gymnasium.make("CartPole-v1")
    try:
        assert isinstance(twin, SelectObservation) and twin.observation_space.shape == (2,)
        obs, _ = twin.reset(seed=3)
        full, _ = plain.reset(seed=3)
        np.testing.assert_array_equal(obs, full[[0, 2]])
        obs, *_ = twin.step(1)
        full, *_ = plain.step(1)
        np.testing.assert_array_equal(obs, full[[0, 2]])
    finally:
        twin.close(), plain.close()


@pytest.mark.parametrize("seed", range(4))
def test_tmaze_shows_the_cue_once_and_pays_only_the_arm_it_named(seed):
    env = make_env("tmaze", max_length=8)
    task = {"length": 5}
    first = rollout(env, [], seed, task)[0]
    cue = int(first.physics["cue"])
    np.testing.assert_array_equal(first.obs, [cue == 0, cue == 1, 0.0])  # the cue, only now
    right_arm, wrong_arm = 2 + cue, 3 - cue
    # up and down in the corridor are walls; back at the start stays there
    states = rollout(env, [right_arm, wrong_arm, 1] + [0] * 5 + [right_arm], seed, task)
    obs = np.stack([np.asarray(s.obs) for s in states[1:]])
    assert (obs[:, :2] == 0).all()  # never shown again
    np.testing.assert_array_equal(obs[:, 2], [0, 0, 0, 0, 0, 0, 0, 1, 1])  # the junction flag after 5 steps forward
    assert not any(bool(s.terminated) for s in states[:-1])
    assert bool(states[-1].terminated) and float(states[-1].reward) == 1.0 and float(states[-1].info["success"]) == 1.0
    wrong = rollout(env, [0] * 5 + [wrong_arm], seed, task)[-1]
    assert bool(wrong.terminated) and float(wrong.reward) == 0.0 and float(wrong.info["success"]) == 0.0


def test_tmaze_length_is_task_data_and_the_time_limit_covers_the_longest_corridor():
    env = make_env("tmaze", max_length=16)
    assert EpisodeWrapper(env).max_episode_steps == 2 * 16 + 8
    assert env.observation_space.shape == (3,) and env.action_space.n == 4
    with pytest.raises(TaskError, match="expected integer scalar in \\[1, 16\\]"):
        env.validate_task({"length": 17})
    with pytest.raises(ValueError, match="default_length must be in"):
        make_env("tmaze", max_length=4, default_length=5)
