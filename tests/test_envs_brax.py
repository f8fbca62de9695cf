"""Smoke test of the brax adapter: one compiled rollout, many task values, no recompiles."""

import base64
import json
import re
import zlib

import brax.envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.envs import EpisodeWrapper, VecEnv, make_env

NUM_ENVS = 3
STEPS = 32
TIME_LIMIT = 30  # short, so the unforced, weightless pendulum is truncated within the rollout


@pytest.fixture(scope="module")
def pendulum():
    env = make_env("brax/inverted_pendulum", max_episode_steps=TIME_LIMIT)
    vec = VecEnv(EpisodeWrapper(env), NUM_ENVS)

    @jax.jit
    def rollout(key, task, action):
        first = vec.reset(key, task)

        def body(state, key):
            state = vec.step(state, jnp.broadcast_to(action, (NUM_ENVS, 1)), key)
            return state, state

        _, traj = jax.lax.scan(body, first, jax.random.split(key, STEPS))
        return first, traj

    def run(gravity_scale=1.0, mass_scale=1.0, action=0.0, seed=0):
        task = {
            "gravity_scale": jnp.broadcast_to(jnp.asarray(gravity_scale, jnp.float32), (NUM_ENVS,)),
            "mass_scale": jnp.broadcast_to(jnp.asarray(mass_scale, jnp.float32), (NUM_ENVS,)),
        }
        return jax.device_get(rollout(jax.random.PRNGKey(seed), task, jnp.float32(action)))

    return env, rollout, run


@pytest.mark.heavy
def test_spaces_and_jitted_rollout(pendulum):
    env, rollout, run = pendulum
    assert env.name == "brax/inverted_pendulum" and env.max_episode_steps == TIME_LIMIT
    assert make_env("brax/inverted_pendulum").max_episode_steps == 1000
    assert env.observation_space.shape == (4,) and env.action_space.shape == (1,)
    assert env.action_space.low.tolist() == [-1.0] and env.action_space.high.tolist() == [1.0]
    assert sorted(env.task_spec) == ["gravity_scale", "mass_scale"]
    first, traj = run()
    assert first.obs.shape == (NUM_ENVS, *env.observation_space.shape) and first.obs.dtype == np.float32
    assert traj.obs.shape == (STEPS, NUM_ENVS, *env.observation_space.shape)
    live = ~traj.episode.post_done
    assert live[0].all() and np.all(traj.reward[live] == 1.0)  # +1 per step the pole is up
    np.testing.assert_array_equal(traj.episode.ret[-1], traj.episode.step[-1])
    assert jit_cache_size(rollout) == 1


def test_gravity_scale_changes_the_dynamics(pendulum):
    _, rollout, run = pendulum
    weightless_first, weightless = run(gravity_scale=0.0)
    heavy_first, heavy = run(gravity_scale=2.0)
    np.testing.assert_allclose(weightless_first.obs, heavy_first.obs)  # same start
    # Unforced, the pole drifts only with its tiny initial velocity when weightless...
    assert np.abs(weightless.obs[-1, :, 1]).max() < 0.05
    assert not weightless.terminated.any()
    assert weightless.truncated[TIME_LIMIT - 1].all() and weightless.episode.step[-1].tolist() == [TIME_LIMIT] * NUM_ENVS
    # ...and falls past the 0.2 rad limit under double gravity.
    assert heavy.terminated.any(axis=0).all() and not heavy.truncated.any()
    assert np.abs(heavy.obs[-1, :, 1]).min() > 0.2
    assert jit_cache_size(rollout) == 1


def test_mass_scale_changes_the_response_to_an_action(pendulum):
    _, rollout, run = pendulum
    _, light = run(mass_scale=1.0, action=0.5)
    _, heavy = run(mass_scale=3.0, action=0.5)
    cart_speed_light, cart_speed_heavy = light.obs[0, :, 2], heavy.obs[0, :, 2]  # after one step
    assert np.all(cart_speed_light > 0.2)
    assert np.all(cart_speed_heavy < 0.6 * cart_speed_light)
    assert jit_cache_size(rollout) == 1


@pytest.mark.slow
def test_episodes_end_as_braxs_own_episode_wrapper_says(pendulum):
    """Beside brax's own env under brax's own `EpisodeWrapper` (its training wrapper: a time limit
    sets `done` and `info["truncation"]`), stepped with the same actions from the same resets: a
    push that topples the pole ends the episode by itself (`terminated`); an unforced pole lasts
    until the time limit (`truncated`, keeping brax's final observation) or falls late. Step for
    step, ours is brax's until the episode ends, and then frozen."""
    from brax.envs.wrappers.training import EpisodeWrapper as BraxEpisodeWrapper

    _, _, run = pendulum
    theirs_env = BraxEpisodeWrapper(brax.envs.get_environment("inverted_pendulum"), TIME_LIMIT, 1)

    @jax.jit
    def theirs(action):
        key = jax.random.PRNGKey(0)
        first = jax.vmap(theirs_env.reset)(jax.random.split(key, NUM_ENVS))

        def body(state, _):
            state = jax.vmap(theirs_env.step)(state, jnp.broadcast_to(action, (NUM_ENVS, 1)))
            return state, (state.obs, state.done, state.info["truncation"])

        return jax.lax.scan(body, first, None, length=STEPS)[1]

    ends = {}
    for action in (1.0, 0.0):
        _, ours = run(action=action)
        obs, done, truncation = jax.device_get(theirs(jnp.float32(action)))
        for env in range(NUM_ENVS):
            end = int(np.argmax(done[:, env]))
            assert done[end, env] and ours.episode.done[end, env] and not ours.episode.done[:end, env].any()
            np.testing.assert_allclose(ours.obs[: end + 1, env], obs[: end + 1, env], rtol=1e-5, atol=1e-6)
            assert bool(ours.truncated[end, env]) == bool(truncation[end, env] == 1)
            assert bool(ours.terminated[end, env]) == bool(truncation[end, env] == 0)
            assert ours.episode.post_done[end + 1 :, env].all()
            ends[action, env] = (end + 1, "truncated" if ours.truncated[end, env] else "terminated")
    # the push topples every pole within steps; unforced, two of the three poles stand to the limit
    assert {kind for (action, _), (_, kind) in ends.items() if action == 1.0} == {"terminated"}, ends
    assert [ends[0.0, env] for env in range(NUM_ENVS)].count((TIME_LIMIT, "truncated")) == 2, ends


def test_unknown_brax_env_names_what_exists():
    with pytest.raises(
        KeyError,
        match=r"unknown brax env 'inverted_pendulumm'; did you mean 'brax/inverted_pendulum'\? "
        r"brax has: .*inverted_pendulum",
    ):
        make_env("brax/inverted_pendulumm")


def test_brax_episodes_are_written_by_braxs_html_viewer(tmp_path):
    """`evaluate --video out.html` for a brax env: the policy's episodes under the checkpoint's
    task, written by brax's viewer; here a constant push under double gravity, which topples the
    pole before the time limit."""
    from ajax_tune.envs import EpisodeWrapper
    from ajax_tune.errors import ConfigError
    from ajax_tune.video import check_video_path, record_brax

    env = EpisodeWrapper(make_env("brax/inverted_pendulum", max_episode_steps=TIME_LIMIT))
    calls = []

    def policy(obs):
        calls.append(obs.shape)
        return np.full((1,), 0.5, np.float32)

    out = record_brax(policy, env, tmp_path / "episode.html", task={"gravity_scale": 2.0})
    (length,) = out["lengths"]
    assert 0 < length < TIME_LIMIT and out["frames"] == length + 1 and calls == [(4,)] * length
    page = (tmp_path / "episode.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Brax visualizer" in page
    encoded = re.search(r'var system = "([A-Za-z0-9+/=]+)";', page).group(1)  # the trajectory the viewer plays
    trajectory = json.loads(zlib.decompress(base64.b64decode(encoded)))
    assert len(trajectory["states"]["x"]) == out["frames"]  # one pose of the bodies per frame
    with pytest.raises(ConfigError, match=r"brax's HTML viewer: episode\.mp4 must end in \.html"):
        check_video_path(tmp_path / "episode.mp4", brax=True)
