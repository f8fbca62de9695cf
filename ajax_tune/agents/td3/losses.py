"""TD3's objectives (Fujimoto et al.): a smoothed, clipped double-Q target for the twin critics,
and a deterministic policy that climbs the first critic (`learner.TD3Learner`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def smoothed_action(policy_fn, actor_params, obs, key, noise, noise_clip):
    """The target policy's action with clipped Gaussian noise: the critic's target is then an
    average over nearby actions, which keeps it from exploiting a narrow peak of its own error."""
    action = jnp.tanh(policy_fn(actor_params, obs))
    eps = jnp.clip(noise * jax.random.normal(key, action.shape, action.dtype), -noise_clip, noise_clip)
    return jnp.clip(action + eps, -1.0, 1.0)


def td3_target(batch, target_q, gamma):
    """r + gamma * min_j Q'_j(s', a'), cut at a termination only (a truncated step keeps its
    bootstrap from the real final observation it stored)."""
    not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
    return jax.lax.stop_gradient(batch.reward + gamma * not_terminal * jnp.min(target_q, axis=0))
