"""Pendulum: gymnasium's Pendulum-v1 with its physics as task data.

Under the default task every transition, reward and reset distribution is that of Pendulum-v1
(never terminates; the 200-step limit is applied by `EpisodeWrapper`), computed in float32.
With less torque than gravity's pull the pendulum cannot be lifted directly and must be swung
up, and a heavier, longer or more strongly pulled pendulum needs more swinging, so
`max_torque`, `gravity`, `mass` and `length` are the curriculum's difficulty knobs.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, TaskField

MAX_SPEED = 8.0
DT = 0.05  # seconds per step
ACTION_BOUND = 2.0  # Pendulum-v1's torque limit: the action space, whatever the task


def _angle_normalize(th: jax.Array) -> jax.Array:
    return ((th + jnp.pi) % (2 * jnp.pi)) - jnp.pi


class Pendulum(Env):
    def __init__(self, max_episode_steps: int = 200):
        self.name = "pendulum"
        self.max_episode_steps = int(max_episode_steps)
        high = np.array([1.0, 1.0, MAX_SPEED], np.float32)
        self.observation_space = gymnasium.spaces.Box(-high, high, dtype=np.float32)
        self.action_space = gymnasium.spaces.Box(-ACTION_BOUND, ACTION_BOUND, (1,), np.float32)
        self.task_spec = {
            # Above the action space's bound a larger limit could never be reached.
            "max_torque": TaskField(
                default=2.0, low=0.0, high=ACTION_BOUND, doc="torque the motor can apply; actions are clipped to it"
            ),
            "gravity": TaskField(default=10.0, low=0.0, high=20.0, doc="gravitational acceleration pulling the pendulum down"),
            "mass": TaskField(default=1.0, low=0.1, high=5.0, doc="mass of the pendulum"),
            "length": TaskField(default=1.0, low=0.1, high=5.0, doc="length of the pendulum"),
        }

    def _obs(self, physics: jax.Array) -> jax.Array:
        th, thdot = physics
        return jnp.stack([jnp.cos(th), jnp.sin(th), thdot]).astype(jnp.float32)

    def reset(self, key, task) -> EnvState:
        high = jnp.array([jnp.pi, 1.0], jnp.float32)
        physics = jax.random.uniform(key, (2,), jnp.float32, -high, high)
        return EnvState.create(obs=self._obs(physics), task=task, physics=physics)

    def step(self, state, action, key) -> EnvState:
        task = state.task
        g, m, l = task["gravity"], task["mass"], task["length"]  # noqa: E741 (the textbook's names)
        th, thdot = state.physics
        max_torque = task["max_torque"]
        u = jnp.clip(jnp.asarray(action, jnp.float32).reshape(-1)[0], -max_torque, max_torque)
        costs = _angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
        newthdot = thdot + (3 * g / (2 * l) * jnp.sin(th) + 3.0 / (m * l**2) * u) * DT
        newthdot = jnp.clip(newthdot, -MAX_SPEED, MAX_SPEED)
        # Gymnasium lets the angle grow without bound; observations and costs are 2*pi-periodic,
        # so wrapping it changes neither and keeps float32 precision over long episodes.
        newth = _angle_normalize(th + newthdot * DT)
        physics = jnp.stack([newth, newthdot]).astype(jnp.float32)
        return state.replace(
            obs=self._obs(physics),
            reward=(-costs).astype(jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            physics=physics,
        )
