"""Running mean and standard deviation of a stream of arrays, updated inside the jitted graph.

What agents use to normalise observations and to scale rewards. It computes what brax's
`brax.training.acme.running_statistics` computes in its default (Welford) mode, with the same
state, arithmetic and defaults, so a switch changes no number. It exists because importing any
`brax.training` module runs `import brax`, which loads MuJoCo's MJX (a few seconds): a cost every
Ray worker pays for every trial, even when no brax env is in sight. This module needs only JAX.

The sample count is two uint32 words (high, low), as in brax, so it stays exact past 2**32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RunningStatisticsState:
    count_hi: jax.Array  # uint32: samples seen, high word
    count_lo: jax.Array  # uint32: samples seen, low word
    mean: jax.Array
    summed_variance: jax.Array  # sum over samples of (x - old mean) * (x - new mean)
    std: jax.Array

    @property
    def count(self) -> jax.Array:
        """The sample count as float32 (what the statistics divide by)."""
        return self.count_hi.astype(jnp.float32) * jnp.float32(2.0**32) + self.count_lo.astype(jnp.float32)


def init_state(template: jax.Array) -> RunningStatisticsState:
    """No samples yet: mean 0 and std 1, shaped like one sample (`template`)."""
    zeros = jnp.zeros(jnp.shape(template), jnp.float32)
    return RunningStatisticsState(
        count_hi=jnp.zeros((), jnp.uint32), count_lo=jnp.zeros((), jnp.uint32),
        mean=zeros, summed_variance=zeros, std=jnp.ones_like(zeros),
    )


def update(
    state: RunningStatisticsState,
    batch: jax.Array,
    *,
    weights: jax.Array | None = None,
    std_min_value: float = 1e-6,
    std_max_value: float = 1e6,
) -> RunningStatisticsState:
    """Fold in a batch of samples (leading axes: the batch; the rest: one sample's shape).

    `weights` (shaped like the batch axes) count a sample that many times; 0 leaves it out, as
    for masked transitions. Batched Welford: the mean moves by the weighted deviations from the
    old mean, and the summed variance grows by (x - old mean) * weight * (x - new mean).
    """
    batch_ndim = batch.ndim - state.mean.ndim
    if batch.shape[batch_ndim:] != state.mean.shape:
        raise ValueError(f"running statistics of shape {state.mean.shape} cannot take a batch shaped {batch.shape}")
    axes = tuple(range(batch_ndim))
    if weights is None:
        increment = jnp.asarray(batch.shape[:batch_ndim], jnp.int32).prod()
        deviation = batch - state.mean
    else:
        if weights.shape != batch.shape[:batch_ndim]:
            raise ValueError(f"weights shaped {weights.shape} do not fit a batch shaped {batch.shape}")
        increment = jnp.sum(weights).astype(jnp.int32)
        deviation = (batch - state.mean) * weights.reshape(weights.shape + (1,) * state.mean.ndim)
    count_lo = state.count_lo + increment.astype(jnp.uint32)
    count_hi = state.count_hi + (count_lo < state.count_lo).astype(jnp.uint32)  # carry
    state = state.replace(count_hi=count_hi, count_lo=count_lo)
    count = state.count

    mean = state.mean + jnp.sum(deviation, axis=axes) / count
    summed_variance = state.summed_variance + jnp.sum(deviation * (batch - mean), axis=axes)
    std = jnp.sqrt(jnp.maximum(summed_variance, 0) / count)  # rounding can make the sum negative
    std = jnp.clip(std, std_min_value, std_max_value)
    return state.replace(mean=mean, summed_variance=summed_variance, std=std)


def normalize(batch: jax.Array, state: RunningStatisticsState, max_abs_value: float | None = None) -> jax.Array:
    """`(batch - mean) / std`, optionally clipped to +-`max_abs_value`; integer data unchanged."""
    if not jnp.issubdtype(batch.dtype, jnp.inexact):
        return batch
    out = (batch - state.mean) / state.std
    return out if max_abs_value is None else jnp.clip(out, -max_abs_value, max_abs_value)
