"""`cartpole` and `pendulum` against gymnasium's CartPole-v1 and Pendulum-v1.

Gymnasium steps in float64 and the JAX envs in float32, so states are compared to float32
tolerance. Both sides start each transition from the same float32-representable state.
"""

import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.base import task_to_jax

CARTPOLE = make_env("cartpole")
PENDULUM = make_env("pendulum")
X_LIMIT = 2.4
THETA_LIMIT = 12 * 2 * math.pi / 360
KNIFE_EDGE = 1e-5  # float32 and float64 may disagree on which side of a limit this close lies


def _batched_step(env):
    """jit(vmap(step)) from given physics states; the task is shared by the batch."""

    def one(physics, action, key, task):
        state = env.reset(key, task).replace(physics=physics)
        nxt = env.step(state, action, key)
        return nxt.obs, nxt.reward, nxt.terminated, nxt.physics

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None)))


def _batched_reset(env):
    return jax.jit(jax.vmap(env.reset, in_axes=(0, None)))


def _episode_rollout(env, policy, steps):
    """jit of a scanned `EpisodeWrapper` rollout from given physics under a jnp policy."""
    wrapped = EpisodeWrapper(env)

    def rollout(physics, obs, task):
        key = jax.random.key(0)
        state = wrapped.reset(key, task).replace(physics=physics, obs=obs)

        def body(state, t):
            nxt = wrapped.step(state, policy(state.obs, t), key)
            return nxt, (nxt.obs, nxt.reward, nxt.terminated, nxt.truncated, nxt.episode)

        return jax.lax.scan(body, state, jnp.arange(steps))[1]

    jitted = jax.jit(rollout)
    return lambda physics, obs, task: jax.device_get(
        jitted(jnp.asarray(physics, jnp.float32), jnp.asarray(obs, jnp.float32), task)
    )


CARTPOLE_STEP = _batched_step(CARTPOLE)
PENDULUM_STEP = _batched_step(PENDULUM)
DEFAULT_CARTPOLE_TASK = task_to_jax(CARTPOLE.default_task())
DEFAULT_PENDULUM_TASK = task_to_jax(PENDULUM.default_task())


def _keys(n):
    return jax.random.split(jax.random.key(0), n)


@pytest.fixture(scope="module")
def gym_cartpole():
    env = gymnasium.make("CartPole-v1")
    yield env
    env.close()


@pytest.fixture(scope="module")
def gym_pendulum():
    env = gymnasium.make("Pendulum-v1")
    yield env
    env.close()


def _gym_steps(env, states, actions):
    """One gymnasium step from each state; returns obs, reward, terminated, float64 next state."""
    out = []
    for state, action in zip(states, actions):
        env.reset(seed=0)  # also clears CartPole's "stepped after termination" bookkeeping
        env.unwrapped.state = np.asarray(state, np.float64)
        obs, reward, terminated, truncated, _ = env.unwrapped.step(action)
        assert not truncated
        out.append((obs, reward, terminated, np.array(env.unwrapped.state, np.float64)))
    obs, reward, terminated, nxt = zip(*out)
    return np.stack(obs), np.array(reward, np.float64), np.array(terminated), np.stack(nxt)


def _cartpole_states(rng):
    def uniform(n, *bounds):
        return np.stack([rng.uniform(-b, b, n) for b in bounds], axis=1)

    typical = uniform(200, 2.4, 3.0, THETA_LIMIT, 3.5)
    near = uniform(160, 0.02, 1.0, 0.005, 1.0)  # offsets from a limit
    signs = rng.choice([-1.0, 1.0], (160, 2))
    near[:80, 0] += signs[:80, 0] * X_LIMIT  # cart near a wall
    near[80:, 2] += signs[80:, 1] * THETA_LIMIT  # pole near its angle limit
    extreme = uniform(100, 2.4, 100.0, THETA_LIMIT, 100.0)
    beyond = uniform(40, 4.8, 3.0, 2 * THETA_LIMIT, 3.5)  # already terminated states
    return np.concatenate([typical, near, extreme, beyond]).astype(np.float32)


def _knife_edge_cartpole(next_state):
    return (np.abs(np.abs(next_state[:, 0]) - X_LIMIT) < KNIFE_EDGE) | (
        np.abs(np.abs(next_state[:, 2]) - THETA_LIMIT) < KNIFE_EDGE
    )


def _check_cartpole_parity(gym_env, states, actions, task):
    obs, reward, terminated, physics = map(
        np.asarray, CARTPOLE_STEP(jnp.asarray(states), jnp.asarray(actions, jnp.int32), _keys(len(states)), task_to_jax(task))
    )
    g_obs, g_reward, g_terminated, g_next = _gym_steps(gym_env, states, [int(a) for a in actions])
    assert obs.dtype == np.float32 and physics.dtype == np.float32
    np.testing.assert_array_equal(obs, physics)
    np.testing.assert_allclose(obs, g_obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(reward, g_reward)  # 1.0, the terminating step included
    knife = _knife_edge_cartpole(g_next)
    assert knife.sum() <= 0.01 * len(states), f"{knife.sum()} knife-edge states: the test lost its power"
    np.testing.assert_array_equal(terminated[~knife], g_terminated[~knife])
    return g_terminated


def test_cartpole_one_step_parity(gym_cartpole):
    rng = np.random.default_rng(0)
    states = _cartpole_states(rng)
    actions = rng.integers(0, 2, len(states))
    g_terminated = _check_cartpole_parity(gym_cartpole, states, actions, CARTPOLE.default_task())
    # Both outcomes are well represented, so termination was really tested.
    assert 100 < g_terminated.sum() < len(states) - 100


def _set_gym_cartpole_task(env, task):
    u = env.unwrapped
    u.length = float(task["pole_length"])
    u.force_mag = float(task["force_mag"])
    u.gravity = float(task["gravity"])
    u.polemass_length = u.masspole * u.length


@pytest.mark.parametrize(
    "task",
    [
        {"pole_length": 0.25, "force_mag": 20.0, "gravity": 12.0},
        {"pole_length": 1.5, "force_mag": 3.0, "gravity": 5.0},
    ],
)
def test_cartpole_one_step_parity_on_other_tasks(task):
    """Each task field means the same as the gymnasium attribute it stands for."""
    task = CARTPOLE.validate_task(task)
    env = gymnasium.make("CartPole-v1")
    _set_gym_cartpole_task(env, task)
    rng = np.random.default_rng(1)
    states = _cartpole_states(rng)[::3]
    _check_cartpole_parity(env, states, rng.integers(0, 2, len(states)), task)
    env.close()


def test_cartpole_terminates_exactly_on_the_limits_like_gymnasium(gym_cartpole):
    """Gymnasium ends an episode when |x| > 2.4 or |theta| > 12 degrees, compared in float64.

    A state sitting still on a limit keeps its float32 value through a step, so here the two
    must agree exactly, with nothing excluded.
    """

    def around(limit):
        f = np.float32(limit)
        return [np.nextafter(f, np.float32(0)), f, np.nextafter(f, np.float32(np.inf))]

    rng = np.random.default_rng(2)
    states = []
    for sign in (-1.0, 1.0):
        for x in around(X_LIMIT):  # cart still on a wall, pole moving
            states.append([sign * x, 0.0, 0.0, rng.uniform(-1, 1)])
        for theta in around(THETA_LIMIT):  # pole still on its limit, cart moving
            states.append([0.0, rng.uniform(-1, 1), sign * theta, 0.0])
    states = np.array(states, np.float32)
    actions = np.arange(len(states)) % 2
    _, _, terminated, _ = map(
        np.asarray, CARTPOLE_STEP(jnp.asarray(states), jnp.asarray(actions, jnp.int32), _keys(len(states)), DEFAULT_CARTPOLE_TASK)
    )
    _, _, g_terminated, _ = _gym_steps(gym_cartpole, states, [int(a) for a in actions])
    np.testing.assert_array_equal(terminated, g_terminated)
    assert 0 < g_terminated.sum() < len(states)


def test_pendulum_one_step_parity(gym_pendulum):
    rng = np.random.default_rng(3)
    n = 500
    th = np.concatenate([rng.uniform(-2 * np.pi, 2 * np.pi, 300), rng.uniform(-20, 20, 200)])
    thdot = np.concatenate(
        [
            rng.uniform(-8, 8, 300),
            rng.uniform(-30, 30, 100),  # beyond the speed limit
            rng.choice([-8.0, 8.0], 100) + rng.uniform(-0.2, 0.2, 100),  # at the speed limit
        ]
    )
    states = np.stack([th, thdot], axis=1).astype(np.float32)
    actions = rng.uniform(-3, 3, (n, 1)).astype(np.float32)  # beyond max_torque too
    actions[:50] = rng.choice([-2.0, 2.0], (50, 1))
    obs, reward, terminated, _ = map(
        np.asarray, PENDULUM_STEP(jnp.asarray(states), jnp.asarray(actions), _keys(n), DEFAULT_PENDULUM_TASK)
    )
    g_obs, g_reward, g_terminated, _ = _gym_steps(gym_pendulum, states, actions)
    assert obs.dtype == np.float32 and reward.dtype == np.float32
    np.testing.assert_allclose(obs, g_obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reward, g_reward, rtol=1e-5, atol=1e-5)
    assert not terminated.any() and not g_terminated.any()
    assert np.any(np.abs(g_obs[:, 2]) == 8.0)  # the speed clip was exercised


@pytest.mark.parametrize(
    "task",
    [
        {"max_torque": 0.7, "gravity": 12.0, "mass": 2.0, "length": 0.5},
        {"max_torque": 1.5, "gravity": 4.0, "mass": 0.3, "length": 2.5},
    ],
)
def test_pendulum_one_step_parity_on_other_tasks(task):
    task = PENDULUM.validate_task(task)
    env = gymnasium.make("Pendulum-v1", g=float(task["gravity"]))
    u = env.unwrapped
    u.max_torque, u.m, u.l = float(task["max_torque"]), float(task["mass"]), float(task["length"])
    rng = np.random.default_rng(4)
    n = 150
    states = np.stack([rng.uniform(-np.pi, np.pi, n), rng.uniform(-8, 8, n)], axis=1).astype(np.float32)
    actions = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    obs, reward, _, _ = map(np.asarray, PENDULUM_STEP(jnp.asarray(states), jnp.asarray(actions), _keys(n), task_to_jax(task)))
    g_obs, g_reward, _, _ = _gym_steps(env, states, actions)
    np.testing.assert_allclose(obs, g_obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reward, g_reward, rtol=1e-5, atol=1e-5)
    env.close()


def _gym_resets(env_id, n):
    env = gymnasium.make(env_id)
    states = [env.reset(seed=0)[0]] + [env.reset()[0] for _ in range(n - 1)]
    raw = []
    for _ in range(n):
        env.reset()
        raw.append(np.array(env.unwrapped.state))
    env.close()
    return np.stack(states), np.stack(raw)


def _assert_same_uniform(samples, reference, low, high):
    """Fixed seeds make this deterministic; the tolerance is ~4.5 sigma for two 4096-samples."""
    assert samples.min() >= low and samples.max() <= high
    qs = np.linspace(0.05, 0.95, 19)
    np.testing.assert_allclose(np.quantile(samples, qs), np.quantile(reference, qs), atol=0.05 * (high - low))


def test_cartpole_reset_distribution():
    n = 4096
    states = _batched_reset(CARTPOLE)(_keys(n), DEFAULT_CARTPOLE_TASK)
    obs, physics = np.asarray(states.obs), np.asarray(states.physics)
    assert obs.dtype == np.float32 and obs.shape == (n, 4)
    np.testing.assert_array_equal(obs, physics)
    g_obs, _ = _gym_resets("CartPole-v1", n)
    for i in range(4):
        _assert_same_uniform(obs[:, i], g_obs[:, i], -0.05, 0.05)
    assert all(CARTPOLE.observation_space.contains(o) for o in obs[:100])


def test_pendulum_reset_distribution():
    n = 4096
    states = _batched_reset(PENDULUM)(_keys(n), DEFAULT_PENDULUM_TASK)
    obs, physics = np.asarray(states.obs), np.asarray(states.physics)
    assert obs.dtype == np.float32 and obs.shape == (n, 3)
    th, thdot = physics[:, 0], physics[:, 1]
    np.testing.assert_allclose(obs, np.stack([np.cos(th), np.sin(th), thdot], axis=1), atol=1e-6)
    _, g_state = _gym_resets("Pendulum-v1", n)
    pi32 = float(np.float32(np.pi))
    _assert_same_uniform(th, g_state[:, 0], -pi32, pi32)
    _assert_same_uniform(thdot, g_state[:, 1], -1.0, 1.0)
    assert not np.any(states.terminated) and not np.any(states.truncated)


def _balance(obs, t):
    return (obs[2] + 0.5 * obs[3] > 0).astype(jnp.int32)


CARTPOLE_BALANCE = _episode_rollout(CARTPOLE, _balance, 510)


def test_cartpole_truncates_at_500_like_gymnasium():
    """A balancing policy lasts the whole episode in both; both truncate at step 500 and only there.

    The upright pole is unstable, so float32 and float64 rollouts drift apart exponentially
    (by ~1e-4 after ~100 steps) and a free-running 500-step comparison cannot match to float32
    tolerance. The rollouts are therefore compared free-running over their first 80 steps, and
    every transition of gymnasium's whole trajectory is replayed from its state.
    """
    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=7)
    start, start_obs = np.array(env.unwrapped.state, np.float32), obs
    g_states, g_actions, g_obs, g_trunc, g_term = [], [], [], [], []
    done = False
    while not done:
        g_states.append(np.array(env.unwrapped.state, np.float32))
        g_actions.append(int(obs[2] + 0.5 * obs[3] > 0))
        obs, reward, terminated, truncated, _ = env.step(g_actions[-1])
        assert reward == 1.0
        g_obs.append(obs)
        g_trunc.append(truncated)
        g_term.append(terminated)
        done = terminated or truncated
    env.close()
    assert len(g_obs) == 500 and g_trunc[-1] and not any(g_trunc[:-1]) and not any(g_term)

    obs, reward, terminated, truncated, episode = CARTPOLE_BALANCE(start, start_obs, DEFAULT_CARTPOLE_TASK)
    assert not terminated.any()
    assert np.flatnonzero(truncated).tolist() == [499]
    assert np.flatnonzero(episode.done).tolist()[0] == 499
    assert episode.step[499] == 500 and episode.ret[499] == 500.0
    # Frozen after the end: same observation, no reward, marked post_done.
    assert episode.post_done[500:].all() and not episode.post_done[:500].any()
    assert (reward[500:] == 0).all() and (obs[500:] == obs[499]).all()
    np.testing.assert_allclose(obs[:80], np.stack(g_obs[:80]), atol=1e-4)

    replay_obs, replay_reward, replay_term, _ = map(
        np.asarray,
        CARTPOLE_STEP(jnp.asarray(np.stack(g_states)), jnp.asarray(g_actions, jnp.int32), _keys(500), DEFAULT_CARTPOLE_TASK),
    )
    np.testing.assert_allclose(replay_obs, np.stack(g_obs), rtol=1e-5, atol=1e-5)
    assert (replay_reward == 1.0).all() and not replay_term.any()


def _open_loop(actions):
    actions = jnp.asarray(actions)
    return lambda obs, t: actions[t]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cartpole_whole_terminating_trajectory_matches(seed):
    """Random pushes topple the pole within a few dozen steps: short enough to compare free-running."""
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, 100)
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=seed)
    start = np.array(env.unwrapped.state, np.float32)
    env.unwrapped.state = start.astype(np.float64)
    g_obs, done = [], False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(int(actions[len(g_obs)]))
        g_obs.append(obs)
        done = terminated or truncated
    final = np.array(env.unwrapped.state)
    env.close()
    assert terminated and not truncated
    assert not _knife_edge_cartpole(final[None])[0]
    n = len(g_obs)

    rollout = _episode_rollout(CARTPOLE, _open_loop(actions), 100)
    obs, reward, term, trunc, episode = rollout(start, start, DEFAULT_CARTPOLE_TASK)
    np.testing.assert_allclose(obs[:n], np.stack(g_obs), rtol=1e-5, atol=1e-5)
    assert np.flatnonzero(term).tolist() == [n - 1] and not trunc.any()
    assert (reward[:n] == 1.0).all() and (reward[n:] == 0.0).all()
    assert episode.step[n - 1] == n and episode.ret[-1] == n


PENDULUM_PUSHES = np.random.default_rng(5).uniform(-1, 1, 205).astype(np.float32)


def _damped_push(obs, t, xp=jnp):
    """Damping plus a fixed random push. The swing-up's near-upright pauses amplify float32
    rounding (to ~1e-3 over 200 steps under open-loop random torques); damping keeps the
    closed loop contracting, so the whole free-running trajectory stays comparable."""
    return xp.clip(-0.5 * obs[2] + xp.asarray(PENDULUM_PUSHES)[t], -2.0, 2.0).reshape(1).astype(xp.float32)


PENDULUM_ROLLOUT = _episode_rollout(PENDULUM, _damped_push, 205)


@pytest.mark.parametrize("seed", [0, 1])
def test_pendulum_whole_trajectory_matches_and_truncates_at_200(seed):
    env = gymnasium.make("Pendulum-v1")
    env.reset(seed=seed)
    start = np.array(env.unwrapped.state, np.float32)
    env.unwrapped.state = start.astype(np.float64)
    obs = np.array([np.cos(start[0]), np.sin(start[0]), start[1]], np.float32)
    start_obs = obs
    g_states, g_actions, g_obs, g_reward, g_trunc, done = [], [], [], [], [], False
    while not done:
        g_states.append(np.array(env.unwrapped.state, np.float32))
        g_actions.append(_damped_push(obs, len(g_obs), xp=np))
        obs, reward, terminated, truncated, _ = env.step(g_actions[-1])
        assert not terminated
        g_obs.append(obs)
        g_reward.append(reward)
        g_trunc.append(truncated)
        done = truncated
    env.close()
    assert len(g_obs) == 200 and g_trunc[-1] and not any(g_trunc[:-1])

    obs, reward, term, trunc, episode = PENDULUM_ROLLOUT(start, start_obs, DEFAULT_PENDULUM_TASK)
    np.testing.assert_allclose(obs[:200], np.stack(g_obs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reward[:200], np.array(g_reward), rtol=1e-5, atol=1e-5)
    assert not term.any() and np.flatnonzero(trunc).tolist() == [199]
    assert episode.step[199] == 200 and episode.done[199] and not episode.done[:199].any()
    assert episode.post_done[200:].all() and (reward[200:] == 0).all()
    np.testing.assert_allclose(episode.ret[199], np.sum(g_reward), rtol=1e-5)

    replay_obs, replay_reward, _, _ = map(
        np.asarray,
        PENDULUM_STEP(jnp.asarray(np.stack(g_states)), jnp.asarray(np.stack(g_actions)), _keys(200), DEFAULT_PENDULUM_TASK),
    )
    np.testing.assert_allclose(replay_obs, np.stack(g_obs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(replay_reward, np.array(g_reward), rtol=1e-5, atol=1e-5)


def test_task_changes_dynamics_without_recompiling():
    """A stronger push moves the cart further, a shorter pole falls faster, and a torque limit
    clips the same action harder, all through the jitted step that already ran."""
    start = jnp.zeros((1, 4), jnp.float32).at[0, 2].set(0.05)
    push = jnp.ones((1,), jnp.int32)

    def after(task, alternate=False, steps=10):
        physics, task = start, task_to_jax(CARTPOLE.validate_task(task))
        for t in range(steps):
            action = (push * (t % 2)) if alternate else push
            _, _, _, physics = CARTPOLE_STEP(physics, action, _keys(1), task)
        return np.asarray(physics[0])

    CARTPOLE_STEP(start, push, _keys(1), DEFAULT_CARTPOLE_TASK)
    compiled = jit_cache_size(CARTPOLE_STEP)
    default, strong = after({}), after({"force_mag": 20.0})
    assert strong[0] > 1.5 * default[0] > 0
    # Balanced pushes leave gravity to topple the pole.
    short, long = after({"pole_length": 0.2}, alternate=True), after({"pole_length": 1.0}, alternate=True)
    assert short[2] > 1.5 * long[2] > 0.05
    assert jit_cache_size(CARTPOLE_STEP) == compiled

    state = jnp.array([[1.0, 0.0]], jnp.float32)
    torque = jnp.full((1, 1), 2.0, jnp.float32)
    weak = task_to_jax(PENDULUM.validate_task({"max_torque": 0.5}))
    _, r_default, _, p_default = PENDULUM_STEP(state, torque, _keys(1), DEFAULT_PENDULUM_TASK)
    compiled = jit_cache_size(PENDULUM_STEP)
    _, r_weak, _, p_weak = PENDULUM_STEP(state, torque, _keys(1), weak)
    _, r_half, _, p_half = PENDULUM_STEP(state, torque / 4, _keys(1), DEFAULT_PENDULUM_TASK)
    assert float(p_weak[0, 1]) < float(p_default[0, 1])
    np.testing.assert_array_equal(p_weak, p_half)  # clipped to 0.5 inside the dynamics
    np.testing.assert_array_equal(r_weak, r_half)
    assert jit_cache_size(PENDULUM_STEP) == compiled
