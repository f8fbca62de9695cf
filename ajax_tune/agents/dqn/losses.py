"""The double-DQN target and the Huber loss on the chosen action's value."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def double_q_target(reward, terminated, next_q_online, next_q_target, gamma):
    """The online network picks the next action and the target network values it (van Hasselt
    et al.), which tempers the max operator's overestimation. A terminated step has no future;
    a truncated one keeps its bootstrap (its successor is the real final observation)."""
    next_action = jnp.argmax(next_q_online, axis=-1)
    next_value = jnp.take_along_axis(next_q_target, next_action[..., None], axis=-1)[..., 0]
    return reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_value


def chosen(q, action):
    return jnp.take_along_axis(q, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def dqn_loss(params, target_params, batch, gamma, delta, q_fn):
    """Huber loss between Q(obs, action) and the (fixed) double-DQN target, over one batch."""
    q = q_fn(params, batch.obs)
    q_taken = chosen(q, batch.action)
    next_online = jax.lax.stop_gradient(q_fn(params, batch.next_obs))
    next_target = q_fn(target_params, batch.next_obs)
    target = jax.lax.stop_gradient(double_q_target(batch.reward, batch.terminated, next_online, next_target, gamma))
    loss = jnp.mean(optax.huber_loss(q_taken, target, delta=delta))
    return loss, {"loss/q": loss, "q/mean": jnp.mean(q_taken), "q/max": jnp.max(q)}
