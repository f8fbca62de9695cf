"""The three SAC objectives: twin soft Q-regression, the entropy-regularised policy, and the
temperature. Each takes only what it differentiates through, so the agent can step them one
after another with separate optimisers."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sample_action(policy_fn, dist, actor_params, obs, key):
    """A reparameterised action in [-1, 1] and its log-density (gradients flow through both)."""
    dist_params = policy_fn(actor_params, obs)
    raw = dist.sample_no_postprocessing(dist_params, key)
    return dist.postprocess(raw), dist.log_prob(dist_params, raw)


def soft_target(batch, next_action, next_log_prob, target_q, alpha, gamma):
    """r + gamma * (min_j Q'_j(s', a') - alpha * log pi(a'|s')), cut at a termination only:
    a truncated step keeps its bootstrap from the real final observation it stored."""
    next_v = jnp.min(target_q, axis=0) - alpha * next_log_prob
    not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
    return jax.lax.stop_gradient(batch.reward + gamma * not_terminal * next_v)


def actor_loss(actor_params, critic_params, policy_fn, critic_fn, dist, obs, alpha, key):
    action, log_prob = sample_action(policy_fn, dist, actor_params, obs, key)
    q = jnp.min(critic_fn(critic_params, obs, action), axis=0)
    return jnp.mean(alpha * log_prob - q), log_prob


def temperature_loss(log_alpha, log_prob, target_entropy):
    """Raises alpha while the policy's entropy (-log_prob) is below the target, lowers it above."""
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(log_prob + target_entropy))
