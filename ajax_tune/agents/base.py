"""What the training loop needs from an agent, and the data it hands over."""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium
import jax
from flax import struct


@struct.dataclass
class Rollout:
    """One unroll of `T` lock-step transitions from `N` envs (arrays shaped `[T, N, ...]`).

    `obs[t]` is the observation the action was chosen from; its successor is `obs[t + 1]`, or
    `last_obs` after the final step. Because envs reset only between unrolls, a successor is
    always the true next observation, also after a truncation.
    """

    obs: jax.Array
    action: jax.Array  # as the policy sampled it (before squashing to the env's range)
    log_prob: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    post_done: jax.Array  # transitions after the episode ended: no information, masked
    last_obs: jax.Array  # [N, ...]


@struct.dataclass
class Clock:
    """Where an update sits in the run: progress drives every schedule."""

    timestep: jax.Array  # absolute env steps before this update, float32
    horizon: jax.Array  # the run's total_timesteps, float32


class Agent(Protocol):
    """An agent owns its parameters and how to improve them; the loop owns everything else.

    `init` builds the agent's state (parameters, optimiser, normalisers, traced
    hyperparameters). `act` is the policy; `update` learns from one rollout.
    """

    config: Any
    num_envs: int
    unroll_length: int

    def init(self, key: jax.Array) -> Any: ...

    def act(self, state: Any, obs: jax.Array, key: jax.Array, deterministic: bool = False) -> tuple[jax.Array, dict]: ...

    def update(self, state: Any, rollout: Rollout, key: jax.Array, clock: Clock) -> tuple[Any, dict]: ...

    def with_hparams(self, state: Any, config: Any) -> Any: ...

    def learning_rate(self, state: Any, clock: Clock) -> jax.Array: ...


def action_scale(space: gymnasium.spaces.Space):
    """Map a policy output in [-1, 1] onto a Box action space (identity for discrete spaces)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return lambda a: a
    low, high = space.low, space.high
    return lambda a: low + (a + 1.0) * 0.5 * (high - low)
