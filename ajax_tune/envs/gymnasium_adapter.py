"""Bridges to gymnasium, both ways.

`run_in_gymnasium` evaluates a policy in the real gymnasium env, the ground truth that a policy
trained on a JAX re-implementation should transfer to. `as_gymnasium` exports any ajax_tune env,
on one fixed task, as a standard `gymnasium.Env`, so that gymnasium tooling (env checkers,
third-party agents, evaluation scripts) can run it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, task_to_jax
from ajax_tune.envs.wrappers import EpisodeWrapper


def _to_gymnasium_action(space: gymnasium.spaces.Space, action: Any):
    """Gymnasium envs assert `action in action_space`, which rejects jax arrays and wrong dtypes."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(np.asarray(action).reshape(()))
    if isinstance(space, gymnasium.spaces.Box):
        return np.asarray(action, np.float32).reshape(space.shape)
    return action


def run_in_gymnasium(
    policy: Callable[[np.ndarray], Any],
    env_id: str,
    episodes: int = 10,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    on_episode: Callable[[int], Any] | None = None,
    wrap: Callable[[gymnasium.Env], gymnasium.Env] | None = None,
) -> dict:
    """Run `policy` (one numpy observation -> action) for `episodes` episodes of `env_id`.

    The first reset is seeded with `seed` and later ones continue its random stream, so the
    result is reproducible. Returns per-episode `returns` and `lengths` and their mean and std.
    `on_episode(n)` is called after the n-th episode (a progress display). A policy with memory
    (`Runner.policy` of a recurrent agent) has a `reset()`, called as each episode starts.
    `wrap` wraps the made env (an observation wrapper that shows the policy what it was trained
    on, such as `SelectObservation`).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env = gymnasium.make(env_id, **dict(env_kwargs or {}))
    if wrap is not None:
        env = wrap(env)
    reset_policy = getattr(policy, "reset", None)
    returns, lengths = [], []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            if callable(reset_policy):
                reset_policy()
            ret, length, done = 0.0, 0, False
            while not done:
                action = _to_gymnasium_action(env.action_space, policy(obs))
                obs, reward, terminated, truncated, _ = env.step(action)
                ret += float(reward)
                length += 1
                done = terminated or truncated
            returns.append(ret)
            lengths.append(length)
            if on_episode is not None:
                on_episode(episode + 1)
    finally:
        env.close()
    return {
        "returns": returns,
        "lengths": lengths,
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "mean_length": float(np.mean(lengths)),
        "std_length": float(np.std(lengths)),
    }


class SelectObservation(gymnasium.ObservationWrapper):
    """Shows only some entries of a Box observation (`indices`): a gymnasium env observed the
    way an ajax_tune env with hidden entries observes (cartpole without velocities)."""

    def __init__(self, env: gymnasium.Env, indices):
        super().__init__(env)
        self.indices = np.asarray(indices, np.int64)
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(space.low[self.indices], space.high[self.indices], dtype=space.dtype)

    def observation(self, observation):
        return np.asarray(observation)[self.indices]


class GymnasiumEnv(gymnasium.Env):
    """An ajax_tune env on a fixed task behind the standard gymnasium API.

    Reset and step are the jitted functional ones, so transitions are exactly those a training
    loop sees. The JAX key of an episode is drawn from gymnasium's `np_random`, which makes
    `reset(seed=...)` reproducible the way gymnasium expects.
    """

    metadata = {"render_modes": []}

    def __init__(self, env: Env | EpisodeWrapper, task: Mapping[str, Any] | None = None, seed: int | None = None):
        self.env = env if isinstance(env, EpisodeWrapper) else EpisodeWrapper(env)
        self.task = task_to_jax(self.env.validate_task(dict(task or {})))
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.render_mode = None
        self._seed = seed  # seeds the first reset unless that reset is given its own seed
        self._reset = jax.jit(self.env.reset)
        self._step = jax.jit(self.env.step)
        self._key: jax.Array | None = None
        self.state: EnvState | None = None

    def _action(self, action: Any) -> jax.Array:
        if isinstance(self.action_space, gymnasium.spaces.Discrete):
            return jnp.asarray(int(np.asarray(action).reshape(())), jnp.int32)
        return jnp.asarray(np.asarray(action, np.float32).reshape(self.action_space.shape))

    def _info(self) -> dict[str, np.ndarray]:
        return {k: np.array(v) for k, v in self.state.info.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and self._seed is not None:
            seed = self._seed
        self._seed = None
        super().reset(seed=seed)
        key = jax.random.key(int(self.np_random.integers(0, 2**31 - 1)))
        self._key, reset_key = jax.random.split(key)
        self.state = self._reset(reset_key, self.task)
        return np.array(self.state.obs, np.float32), self._info()

    def step(self, action):
        if self.state is None:
            raise RuntimeError(f"{self.env.name}: call reset() before step()")
        self._key, step_key = jax.random.split(self._key)
        self.state = self._step(self.state, self._action(action), step_key)
        s = self.state
        return (
            np.array(s.obs, np.float32),
            float(s.reward),
            bool(s.terminated),
            bool(s.truncated),
            self._info(),
        )


def as_gymnasium(env: Env | EpisodeWrapper, task: Mapping[str, Any] | None = None, seed: int | None = None) -> GymnasiumEnv:
    """`env` on `task` (default: its default task) as a `gymnasium.Env`; `seed` seeds the first reset."""
    return GymnasiumEnv(env, task=task, seed=seed)
