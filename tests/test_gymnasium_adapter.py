"""Running policies in real gymnasium envs, and exporting ajax_tune envs as gymnasium envs."""

import warnings

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ajax_tune.envs import EpisodeWrapper, TaskError, make_env
from ajax_tune.envs.gymnasium_adapter import GymnasiumEnv, as_gymnasium, run_in_gymnasium


def balance(obs):
    return int(obs[2] + 0.5 * obs[3] > 0)


def test_run_in_gymnasium_balancing_policy_beats_random():
    result = run_in_gymnasium(balance, "CartPole-v1", episodes=5, seed=0)
    rng = np.random.default_rng(0)
    rand = run_in_gymnasium(lambda obs: rng.integers(2), "CartPole-v1", episodes=20, seed=0)
    assert len(result["lengths"]) == 5 and len(result["returns"]) == 5
    assert result["returns"] == [float(n) for n in result["lengths"]]  # reward 1 per step
    assert result["mean_length"] == np.mean(result["lengths"])
    assert result["std_return"] == pytest.approx(np.std(result["returns"]))
    assert rand["mean_length"] < 60
    assert result["mean_length"] > 5 * rand["mean_length"] and result["mean_length"] > 400
    assert max(result["lengths"]) <= 500  # CartPole-v1's time limit


def test_run_in_gymnasium_converts_actions_and_is_reproducible():
    # Pendulum expects a float32 array of shape (1,): give it a jax scalar.
    def swing(obs):
        return jnp.asarray(2.0 * np.sign(obs[2] + 1e-3))

    a = run_in_gymnasium(swing, "Pendulum-v1", episodes=2, seed=3)
    b = run_in_gymnasium(swing, "Pendulum-v1", episodes=2, seed=3)
    c = run_in_gymnasium(swing, "Pendulum-v1", episodes=2, seed=4)
    assert a["lengths"] == [200, 200]
    assert a == b and a["returns"] != c["returns"]
    # Discrete actions given as numpy or jax integers work too.
    short = run_in_gymnasium(lambda obs: np.int64(1), "CartPole-v1", episodes=1, env_kwargs={"sutton_barto_reward": True})
    assert short["lengths"][0] < 30 and short["returns"] == [-1.0]  # sutton_barto_reward reached make()


CHECK_ENV_WARNINGS = (
    # Raised for gymnasium's own CartPole-v1 and Pendulum-v1 spaces as well.
    "Box observation space minimum value is -infinity",
    "Box observation space maximum value is infinity",
    "we recommend using a symmetric and normalized space",
)


@pytest.mark.parametrize("name", ["cartpole", "pendulum", "corridor"])
def test_as_gymnasium_passes_check_env(name):
    env = as_gymnasium(make_env(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    unexpected = [str(w.message) for w in caught if not any(s in str(w.message) for s in CHECK_ENV_WARNINGS)]
    assert not unexpected
    assert isinstance(env, gymnasium.Env) and env.observation_space == make_env(name).observation_space


CARTPOLE = EpisodeWrapper(make_env("cartpole"))
CARTPOLE_STEP = jax.jit(CARTPOLE.step)


@pytest.mark.parametrize("seed", [0, 5])
def test_as_gymnasium_follows_the_functional_env(seed):
    genv = as_gymnasium(make_env("cartpole"), seed=seed)
    obs, info = genv.reset()
    assert info == {} and obs.dtype == np.float32
    state = genv.state
    np.testing.assert_array_equal(obs, np.asarray(state.obs))
    actions = np.random.default_rng(seed).integers(0, 2, 600)
    actions[:300] = -1  # balance first, then push randomly until the pole falls
    key = jax.random.key(0)
    for t in range(600):
        action = balance(obs) if actions[t] < 0 else int(actions[t])
        obs, reward, terminated, truncated, info = genv.step(action)
        state = CARTPOLE_STEP(state, jnp.int32(action), key)
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        np.testing.assert_array_equal(obs, np.asarray(state.obs))
        assert reward == float(state.reward)
        assert terminated == bool(state.terminated) and truncated == bool(state.truncated)
        if terminated or truncated:
            break
    assert terminated and 300 < t < 500


def test_as_gymnasium_truncates_and_seeds_like_gymnasium():
    genv = as_gymnasium(make_env("cartpole"))
    obs, _ = genv.reset(seed=11)
    for t in range(500):  # noqa: B007 (read after the loop)
        obs, reward, terminated, truncated, _ = genv.step(balance(obs))
        assert not terminated
        if truncated:
            break
    assert truncated and t == 499

    first = as_gymnasium(make_env("cartpole"), seed=11).reset()[0]
    np.testing.assert_array_equal(first, genv.reset(seed=11)[0])
    assert not np.array_equal(first, genv.reset(seed=12)[0])
    assert np.abs(first).max() <= 0.05


def test_as_gymnasium_task():
    genv = as_gymnasium(make_env("pendulum"), task={"max_torque": 0.5})
    assert genv.state is None and float(genv.task["max_torque"]) == 0.5
    genv.reset(seed=0)
    assert float(genv.state.task["max_torque"]) == 0.5 and float(genv.state.task["gravity"]) == 10.0
    obs, reward, *_ = genv.step(np.array([2.0], np.float32))
    assert obs.shape == (3,) and obs.dtype == np.float32
    with pytest.raises(TaskError):
        as_gymnasium(make_env("pendulum"), task={"max_torque": 5.0})
    with pytest.raises(TaskError):
        as_gymnasium(make_env("pendulum"), task={"torque": 1.0})
    wrapped = EpisodeWrapper(make_env("pendulum"), max_episode_steps=3)
    genv = GymnasiumEnv(wrapped)
    genv.reset(seed=0)
    dones = [genv.step(np.zeros(1, np.float32))[3] for _ in range(3)]
    assert dones == [False, False, True]  # an already wrapped env keeps its own time limit
