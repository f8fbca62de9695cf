"""IQL's three objectives (Kostrikov et al., 2021): a value that is an upper expectile of the
critics' values on the dataset's actions, critics regressed on `r + gamma * V(s')` (no action
outside the dataset is ever queried), and a policy that clones the dataset's actions weighted
by exp(temperature * advantage)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def expectile_loss(diff: jax.Array, expectile: jax.Array) -> jax.Array:
    """Asymmetric squares: positive differences (critic above value) weigh `expectile`."""
    weight = jnp.where(diff > 0, expectile, 1.0 - expectile)
    return jnp.mean(weight * diff**2)


def value_target(batch, next_value, gamma):
    not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
    return jax.lax.stop_gradient(batch.reward + gamma * not_terminal * next_value)


def advantage_weights(q, value, temperature, max_weight):
    return jax.lax.stop_gradient(jnp.minimum(jnp.exp(temperature * (q - value)), max_weight))


def gaussian_log_prob(mean, log_std, action):
    """Log-density of `action` under a diagonal normal (actions in [-1, 1]; the mean is a tanh)."""
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * jnp.log(2.0 * jnp.pi), axis=-1)
