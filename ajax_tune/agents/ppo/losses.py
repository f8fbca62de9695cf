"""Generalised advantage estimation and the clipped PPO objective."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(reward, value, next_value, terminated, truncated, gamma, lam):
    """Advantages and value targets for `[T, N]` transitions.

    `next_value[t]` is the value of the true successor of step t. A termination cuts the
    bootstrap (the successor is worth nothing); a truncation keeps it (the episode was only
    stopped). Either way the episode ends there, so no advantage flows back across it.
    Post-done steps carry all-false flags and are masked by the caller; since they only follow a
    done step, they never leak into the advantages of real steps.
    """
    not_terminal = 1.0 - terminated.astype(jnp.float32)
    continues = 1.0 - (terminated | truncated).astype(jnp.float32)
    delta = reward + gamma * next_value * not_terminal - value

    def backward(next_adv, xs):
        delta_t, continues_t = xs
        adv = delta_t + gamma * lam * continues_t * next_adv
        return adv, adv

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(delta[0]), (delta, continues), reverse=True)
    return advantages, advantages + value


def successor_values(value, batch, clock, successors):
    """`next_value` for `gae`: the value of each step's true successor.

    Where an episode goes on past step t, its successor is step t+1 (its observation, and for a
    recurrent agent the carry step t left), whose value `value[t + 1]` already is. Only a step that
    a time limit cut has a successor of its own (the episode's final observation, not the reset
    one that follows), and so has the unroll's last step; a termination's successor is worth
    nothing. With the env's time limit L known (`clock.episode_limit`), an env's unroll of T steps
    holds at most (T - 1) // L + 1 cut steps (an episode is truncated exactly when it reaches L
    steps), so `successors(steps)` evaluates that many per env, `steps` being `[k, N]` step
    indices, instead of all T (`successors(None)`, where L is unknown or the bound no smaller)."""
    length, num_envs = value.shape
    limit = clock.episode_limit
    count = length if not limit else min(length, (length - 1) // limit + 2)
    if count >= length:
        return successors(None)
    own = (batch.truncated & ~batch.terminated) | (jnp.arange(length) == length - 1)[:, None]
    steps = jnp.argsort(~own, axis=0, stable=True)[:count]  # the steps that need one first, then any (exact too)
    following = jnp.concatenate([value[1:], value[-1:]])
    return following.at[steps, jnp.arange(num_envs)].set(successors(steps))


def positive_advantage(advantage, mask):
    """Each env's learning signal for task samplers: its mean positive advantage over the real
    steps of the unroll ("positive value loss" in prioritized level replay); NaN for an env with
    none."""
    steps = jnp.sum(mask, axis=0)
    return jnp.where(steps > 0, jnp.sum(jnp.maximum(advantage, 0.0) * mask, axis=0) / jnp.maximum(steps, 1.0), jnp.nan)


def masked_mean(x, mask):
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def ppo_loss(params, batch, hp, key, policy_fn, value_fn, dist):
    """The clipped surrogate, value regression and entropy bonus over one minibatch."""
    logits = policy_fn(params["policy"], batch["obs"])
    return clipped_objective(logits, lambda: value_fn(params["value"], batch["obs"]), batch, hp, key, dist)


def clipped_objective(logits, value_of, batch, hp, key, dist):
    """`ppo_loss` given the policy's outputs and (`value_of()`) the values of the minibatch's
    steps, however a network made them (recurrent PPO replays an unroll to get them)."""
    mask = batch["mask"]
    log_prob = dist.log_prob(logits, batch["action"])
    log_ratio = log_prob - batch["log_prob"]
    ratio = jnp.exp(log_ratio)

    adv = batch["advantage"]
    mean = masked_mean(adv, mask)
    std = jnp.sqrt(masked_mean((adv - mean) ** 2, mask))
    adv = (adv - mean) / (std + 1e-8)
    clipped = jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps)
    policy_loss = masked_mean(-jnp.minimum(ratio * adv, clipped * adv), mask)

    value = value_of()
    value_loss = masked_mean(0.5 * (value - batch["target"]) ** 2, mask)
    entropy = masked_mean(dist.entropy(logits, key), mask)

    total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    metrics = {
        "loss/policy": policy_loss,
        "loss/value": value_loss,
        "loss/entropy": entropy,
        "loss/approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),
        "loss/clip_fraction": masked_mean((jnp.abs(ratio - 1.0) > hp.clip_eps).astype(jnp.float32), mask),
    }
    return total, metrics
