"""What a level is worth replaying, from one rollout on it (per env; inputs `[T, N]`).

- Positive value loss (PLR's default): the mean of the clipped GAE advantage, max(A, 0), over the
  rollout's real steps: how much better than expected the agent did where it was surprised.
- MaxMC (robust PLR and ACCEL in JaxUED): the mean of (the best episode return ever seen on the
  level - V(s)) over the rollout's real steps: regret against the best the agent has shown.
- Learnability (SFL, Rutherford et al. 2024): p (1 - p) for a success rate p: highest where the
  agent succeeds half the time.

A rollout that completed no episode on its level says nothing reliable: its score is -inf (and
a buffer never writes it), as in JaxUED.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _mean_over_steps(x: jax.Array, valid: jax.Array) -> jax.Array:
    return jnp.sum(x * valid, axis=0) / jnp.maximum(jnp.sum(valid, axis=0), 1.0)


def positive_value_loss(advantages: jax.Array, valid: jax.Array, completed: jax.Array) -> jax.Array:
    return jnp.where(completed, _mean_over_steps(jnp.maximum(advantages, 0.0), valid), -jnp.inf)


def max_mc(values: jax.Array, valid: jax.Array, max_returns: jax.Array) -> jax.Array:
    """`max_returns` [N]: the best episode return seen on each env's level, -inf where none."""
    return jnp.where(jnp.isfinite(max_returns), _mean_over_steps(max_returns[None] - values, valid), -jnp.inf)


def learnability(success_rate: jax.Array) -> jax.Array:
    return success_rate * (1.0 - success_rate)
