"""Running mean and variance, shared by every agent: observations are normalised by them, and
PPO scales rewards by the running std of the discounted return.

Mean and variance are merged batch by batch (Chan et al.'s parallel update), with a weight per
sample so that masked steps (an env frozen after its episode ended) do not count. The state is
a small pytree of arrays carried in the agent's state, so it is checkpointed and vmapped over
seeds like the parameters. Brax's training code keeps the same statistics; importing it would
start brax's physics stack in every process, so the few lines live here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RunningStats:
    count: jax.Array  # float32 total weight seen
    mean: jax.Array
    m2: jax.Array  # sum of squared deviations from the mean
    std: jax.Array


class RunningNormalizer:
    """Running statistics of values of shape `shape` (observations, discounted returns), and
    normalisation by them; when disabled it passes values through and learns nothing, but the
    state is still there, so checkpoints keep one layout."""

    def __init__(self, shape: tuple[int, ...], enabled: bool = True, std_min: float = 1e-6, std_max: float = 1e6):
        self.shape, self.enabled = tuple(shape), enabled
        self.std_min, self.std_max = std_min, std_max

    def init(self) -> RunningStats:
        zeros = jnp.zeros(self.shape, jnp.float32)
        return RunningStats(count=jnp.zeros((), jnp.float32), mean=zeros, m2=zeros, std=jnp.ones(self.shape, jnp.float32))

    def update(self, stats: RunningStats, values: jax.Array, weights: jax.Array | None = None) -> RunningStats:
        """Merge a batch `[..., *shape]` with per-sample `weights` `[...]` (default all 1)."""
        if not self.enabled:
            return stats
        values = values.reshape(-1, *self.shape).astype(jnp.float32)
        w = jnp.ones(values.shape[0], jnp.float32) if weights is None else weights.reshape(-1).astype(jnp.float32)
        w_values = w.reshape(-1, *([1] * len(self.shape)))
        batch_count = jnp.sum(w)
        batch_mean = jnp.sum(w_values * values, axis=0) / jnp.maximum(batch_count, 1.0)
        batch_m2 = jnp.sum(w_values * (values - batch_mean) ** 2, axis=0)
        count = stats.count + batch_count
        delta = batch_mean - stats.mean
        share = batch_count / jnp.maximum(count, 1.0)
        mean = stats.mean + delta * share
        m2 = stats.m2 + batch_m2 + delta**2 * stats.count * share
        std = jnp.clip(jnp.sqrt(m2 / jnp.maximum(count, 1.0)), self.std_min, self.std_max)
        std = jnp.where(count > 0, std, stats.std)
        return RunningStats(count=count, mean=mean, m2=m2, std=std)

    def __call__(self, stats: RunningStats, values: jax.Array) -> jax.Array:
        if not self.enabled:
            return values
        return (values - stats.mean) / stats.std
