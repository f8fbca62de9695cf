"""PointReach: reachable by steering, hard by chance, and its task is data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.envs import EpisodeWrapper, TaskError, VecEnv, make_env


def push_toward_target(obs, key):
    to_target = obs[..., 4:6]
    return to_target / jnp.maximum(jnp.linalg.norm(to_target, axis=-1, keepdims=True), 1e-6)


def random_actions(obs, key):
    return jax.random.uniform(key, obs.shape[:-1] + (2,), minval=-1.0, maxval=1.0)


def rollout(vec, task, policy, steps, seed=0):
    """Reset, then `steps` steps of `policy`; returns the stacked states after each step."""

    @jax.jit
    def run(key, task):
        reset_key, key = jax.random.split(key)

        def body(state, key):
            act_key, step_key = jax.random.split(key)
            state = vec.step(state, policy(state.obs, act_key), step_key)
            return state, state

        _, traj = jax.lax.scan(body, vec.reset(reset_key, task), jax.random.split(key, steps))
        return traj

    return jax.device_get(run(jax.random.PRNGKey(seed), vec.batch_task(task)))


def task(distance, radius):
    return {"distance": jnp.asarray(distance, jnp.float32), "radius": jnp.asarray(radius, jnp.float32)}


def test_spaces_and_registry():
    env = make_env("point_reach")
    assert env.name == "point_reach" and env.has_success and env.max_episode_steps == 100
    assert env.action_space.shape == (2,) and env.action_space.low.min() == -1 and env.action_space.high.max() == 1
    assert make_env("point_reach", max_episode_steps=7).max_episode_steps == 7
    state = env.reset(jax.random.PRNGKey(0), task(1.0, 0.1))
    assert state.obs.shape == env.observation_space.shape and state.obs.dtype == jnp.float32
    with pytest.raises(TaskError, match="distance"):
        env.validate_task({"distance": 50.0})
    with pytest.raises(TaskError, match="radius"):
        env.validate_task({"radius": 0.0})


def test_scripted_policy_reaches_target_and_terminates():
    vec = VecEnv(EpisodeWrapper(make_env("point_reach")), 8)
    traj = rollout(vec, task(1.0, 0.1), push_toward_target, steps=40)
    live = ~traj.episode.post_done  # (steps, envs): transitions before the episode ended
    assert traj.episode.done[-1].all()
    assert (traj.terminated & live).sum(axis=0).tolist() == [1] * 8  # ends once, by termination
    assert not (traj.truncated & live).any()
    assert ((traj.info["success"] == 1) & live).sum(axis=0).tolist() == [1] * 8
    np.testing.assert_array_equal((traj.info["success"] == 1) & live, traj.terminated & live)
    lengths = traj.episode.step[-1]
    assert (lengths >= 10).all() and (lengths <= 25).all(), lengths  # ~20 steps for distance 1
    # Progress rewards telescope to the distance covered (1 - at most the radius), plus the bonus.
    assert np.all(traj.episode.ret[-1] > 1.85) and np.all(traj.episode.ret[-1] <= 2.0 + 1e-5)


def test_far_small_target_needs_steering_not_luck():
    vec = VecEnv(EpisodeWrapper(make_env("point_reach")), 64)
    hard = task(5.0, 0.05)
    steered = rollout(vec, hard, push_toward_target, steps=100)
    assert steered.info["success"].max(axis=0).mean() == 1.0  # feasible within the time limit
    lucky = rollout(vec, hard, random_actions, steps=100)
    assert lucky.info["success"].max(axis=0).mean() < 0.05
    assert lucky.truncated.any(axis=0).mean() > 0.95
    assert lucky.episode.step[-1].tolist() == [100] * 64


def test_task_distance_is_the_initial_distance():
    distances = np.array([0.05, 0.5, 1.0, 2.5, 5.0], np.float32)
    vec = VecEnv(EpisodeWrapper(make_env("point_reach")), len(distances))
    state = jax.jit(vec.reset)(jax.random.PRNGKey(3), vec.batch_task(task(distances, 0.1)))
    obs = np.asarray(state.obs)
    np.testing.assert_allclose(obs[:, :4], 0.0)  # at rest at the origin
    np.testing.assert_allclose(np.linalg.norm(obs[:, 4:6], axis=1), distances, rtol=1e-5)
    directions = obs[:, 4:6] / distances[:, None]
    assert np.unique(np.round(directions, 3), axis=0).shape[0] == len(distances)  # random headings


def test_radius_decides_success_of_the_same_position():
    env = make_env("point_reach")
    step = jax.jit(env.step)
    start = env.reset(jax.random.PRNGKey(0), task(0.3, 0.1))
    zero = jnp.zeros((2,), jnp.float32)
    outcomes = {}
    for radius in (0.29, 0.31):  # the point stays at the origin, 0.3 from the target
        nxt = step(start.replace(task=task(0.3, radius)), zero, jax.random.PRNGKey(1))
        outcomes[radius] = (bool(nxt.terminated), float(nxt.info["success"]), float(nxt.reward))
    assert outcomes[0.29] == (False, 0.0, 0.0)
    assert outcomes[0.31] == (True, 1.0, 1.0)
    assert jit_cache_size(step) == 1  # the radius is data, not a constant


def test_a_fast_point_cannot_jump_over_a_small_target():
    env = make_env("point_reach")
    start = env.reset(jax.random.PRNGKey(0), task(1.0, 0.01))
    target = jnp.array([0.05, 0.0], jnp.float32)
    moving = start.replace(physics=start.physics.replace(vel=jnp.array([1.0, 0.0]), target=target))
    nxt = env.step(moving, jnp.zeros((2,), jnp.float32), jax.random.PRNGKey(1))
    assert float(jnp.linalg.norm(nxt.physics.pos - target)) > 0.03  # ends well past it...
    assert bool(nxt.terminated) and float(nxt.info["success"]) == 1.0  # ...but passed through it


def test_per_env_tasks_in_one_vec_env():
    distances = [0.5, 0.5, 3.0, 3.0]
    radii = [0.4, 0.02, 0.4, 0.02]
    vec = VecEnv(EpisodeWrapper(make_env("point_reach")), 4)
    traj = rollout(vec, task(distances, radii), push_toward_target, steps=60)
    assert traj.info["success"].max(axis=0).tolist() == [1.0] * 4
    near_wide, near_small, far_wide, far_small = traj.episode.step[-1].tolist()
    assert near_wide < near_small < far_wide < far_small, traj.episode.step[-1]

    # A new task reaches each env at its next reset, and only there.
    state = jax.tree.map(lambda x: x[-1], traj)
    state = vec.set_task(state, vec.batch_task(task([1.0, 2.0, 4.0, 0.2], 0.1)))
    state = vec.reset_done(state, jax.random.PRNGKey(9))
    np.testing.assert_allclose(np.linalg.norm(state.obs[:, 4:6], axis=1), [1.0, 2.0, 4.0, 0.2], rtol=1e-5)
