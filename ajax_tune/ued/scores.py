"""What a level is worth replaying, from one rollout on it: the quantities JaxUED's
`jaxued.utils` computes (`tests/test_ued_parity.py` checks them equal), per env.

Inputs are time-major, `[T, N]`; `done[t, n]` says that env n's episode ended at step t (once
per episode: steps after it that a frozen env takes are not done, and they count for nothing, as
no episode ends after them). An episode is what lies between two dones, or between the rollout's
start and its first done; steps after the rollout's last done belong to no completed episode.

- Positive value loss (PLR's default): each completed episode's time-mean of max(A, 0), the
  clipped GAE advantage, then the mean over the completed episodes: how much better than
  expected the agent did where it was surprised.
- MaxMC (robust PLR and ACCEL in JaxUED): the same mean of (the best return the agent has shown
  on the level - V(s)): regret against its own best.
- Learnability (SFL, Rutherford et al. 2024): p (1 - p) for a success rate p: highest where the
  agent succeeds half the time.

A rollout that completed no episode says nothing reliable about its level: both scores are -inf
there, and a buffer never takes a level in on -inf (JaxUED's rule too).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _per_episode_mean(done: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The mean over completed episodes of each one's time-mean of `x`, and how many completed."""

    def step(carry, inputs):
        running, steps, means, episodes = carry
        ended, value = inputs
        running, steps = running + value, steps + 1
        means = means + jnp.where(ended, running / steps, 0.0)
        return (jnp.where(ended, 0.0, running), jnp.where(ended, 0, steps), means, episodes + ended), None

    zeros = jnp.zeros(x.shape[1:], jnp.float32)
    start = (zeros, jnp.zeros(x.shape[1:], jnp.int32), zeros, jnp.zeros(x.shape[1:], jnp.int32))
    (_, _, means, episodes), _ = jax.lax.scan(step, start, (done.astype(jnp.bool_), x.astype(jnp.float32)))
    return means / jnp.maximum(episodes, 1), episodes


def positive_value_loss(done: jax.Array, advantages: jax.Array) -> jax.Array:
    """[N]: `advantages` [T, N] (GAE), -inf where no episode completed."""
    mean, episodes = _per_episode_mean(done, jnp.maximum(advantages, 0.0))
    return jnp.where(episodes > 0, mean, -jnp.inf)


def max_mc(done: jax.Array, values: jax.Array, max_returns: jax.Array) -> jax.Array:
    """[N]: `values` [T, N] (the critic's V(s_t)), `max_returns` [N] (the best return seen on
    each env's level, this rollout's included), -inf where no episode completed."""
    mean, episodes = _per_episode_mean(done, max_returns[None] - values)
    return jnp.where(episodes > 0, mean, -jnp.inf)


def max_returns(done: jax.Array, rewards: jax.Array) -> jax.Array:
    """[N]: the best return of an episode completed in the rollout, `rewards` [T, N]. As JaxUED's
    `compute_max_returns`, it is never below 0 (0 where no episode completed): the best starts at
    0, so a level whose every episode lost reward keeps 0 as its best."""

    def step(carry, inputs):
        running, best = carry
        ended, reward = inputs
        running = running + reward
        return (jnp.where(ended, 0.0, running), jnp.where(ended, jnp.maximum(best, running), best)), None

    zeros = jnp.zeros(rewards.shape[1:], jnp.float32)
    (_, best), _ = jax.lax.scan(step, (zeros, zeros), (done.astype(jnp.bool_), rewards.astype(jnp.float32)))
    return best


def learnability(success_rate: jax.Array) -> jax.Array:
    return success_rate * (1.0 - success_rate)
