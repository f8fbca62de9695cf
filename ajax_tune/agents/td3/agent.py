"""TD3 for continuous actions, on the off-policy base (`agents/offpolicy.py`).

Twin critics learn at every gradient step; the deterministic actor and both targets move on every
`policy_delay`-th one, so the actor climbs a critic that has settled a little. Acting adds
Gaussian noise to the actor's action, and is uniform until `learning_starts`.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax_tune.agents.base import action_scale
from ajax_tune.agents.networks import MLP, TwinQ
from ajax_tune.agents.offpolicy import OffPolicyAgent, OffPolicyState, ReplayTransition, check_bounded_box, twin_critic_loss
from ajax_tune.agents.td3.config import TD3Config
from ajax_tune.agents.td3.losses import actor_loss, smoothed_action, td3_target


@struct.dataclass
class TD3State(OffPolicyState):
    """`params` and `target_params`: "actor" and "critic" (the twin critics stacked on a leading
    axis of 2); `opt_state`: one per network."""

    gradient_steps: jax.Array  # int32 gradient steps taken since the run began (the actor's cadence)


class TD3(OffPolicyAgent):
    learn_keys = ("loss/critic", "loss/actor", "q/mean", "grad_norm/critic", "grad_norm/actor")
    metric_keys = (*learn_keys, "lr", "replay/size")

    def __init__(self, config: TD3Config, observation_space: gymnasium.spaces.Box, action_space):
        check_bounded_box("td3", action_space)
        self.action_dim = int(action_space.shape[0])
        super().__init__(config, observation_space, jax.ShapeDtypeStruct((self.action_dim,), jnp.float32))
        self.to_env = action_scale(action_space)
        self.actor = MLP(config.hidden_sizes, self.action_dim, config.activation, out_scale=0.01)  # tanh of it acts
        self.critic = TwinQ(config.hidden_sizes, config.activation)

    def init(self, key: jax.Array) -> TD3State:
        k_actor, k_q1, k_q2 = jax.random.split(key, 3)
        obs, action = jnp.zeros((1, *self.obs_shape), jnp.float32), jnp.zeros((1, self.action_dim), jnp.float32)
        params = {"actor": self.actor.init(k_actor, obs), "critic": self.critic.init(k_q1, k_q2, obs, action)}
        return TD3State(
            params=params,
            target_params=params,
            gradient_steps=jnp.zeros((), jnp.int32),
            opt_state={name: self.optimizer.init(p) for name, p in params.items()},
            **self.initial_fields(),
        )

    def act(self, state: TD3State, obs, key, deterministic: bool = False):
        action = jnp.tanh(self.actor.apply(state.params["actor"], self.obs_norm(state.obs_norm, obs)))
        if deterministic:
            return self.to_env(action), {}
        k_noise, k_uniform = jax.random.split(key)
        noisy = jnp.clip(action + state.hp.exploration_noise * jax.random.normal(k_noise, action.shape), -1.0, 1.0)
        uniform = jax.random.uniform(k_uniform, action.shape, action.dtype, -1.0, 1.0)
        action = jnp.where(state.timestep < self.config.learning_starts, uniform, noisy)
        return self.to_env(action), {"action": action}

    def stored_action(self, action, extras):
        return extras["action"]  # in the policy's space, [-1, 1]

    def learn(self, state: TD3State, fresh: ReplayTransition, key, lr):
        hp, normalize = state.hp, lambda x: self.obs_norm(state.obs_norm, x)  # noqa: E731

        def targets(params, next_obs, reward_batch, k):
            next_action = smoothed_action(self.actor.apply, params["actor"], next_obs, k, hp.target_noise, hp.target_noise_clip)
            return td3_target(reward_batch, self.critic(params["critic"], next_obs, next_action), hp.gamma)

        def gradient_step(carry, k):
            params, target_params, opt_state, count = carry
            k_sample, k_noise = jax.random.split(k)
            batch = self.buffer.sample(state.buffer, k_sample)
            obs, next_obs = normalize(batch.obs), normalize(batch.next_obs)
            target = targets(target_params, next_obs, batch, k_noise)
            (c_loss, q), grads = jax.value_and_grad(twin_critic_loss, has_aux=True)(
                params["critic"], self.critic, obs, batch.action, target
            )
            critic, opt_critic, critic_norm = self.optimizer.step(
                params["critic"], grads, opt_state["critic"], lr, hp.max_grad_norm
            )
            a_loss, grads = jax.value_and_grad(actor_loss)(params["actor"], critic, self.actor.apply, self.critic, obs)
            actor, opt_actor, actor_norm = self.optimizer.step(params["actor"], grads, opt_state["actor"], lr, hp.max_grad_norm)
            count = count + 1
            due = count % self.config.policy_delay == 0  # the delayed part: actor and targets
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(due, a, b), new, old)  # noqa: E731
            params = {"actor": keep(actor, params["actor"]), "critic": critic}
            opt_state = {"actor": keep(opt_actor, opt_state["actor"]), "critic": opt_critic}
            target_params = keep(optax.incremental_update(params, target_params, hp.tau), target_params)
            metrics = {
                "loss/critic": c_loss,
                "loss/actor": a_loss,
                "q/mean": jnp.mean(q),
                "grad_norm/critic": critic_norm,
                "grad_norm/actor": actor_norm,
            }
            return (params, target_params, opt_state, count), metrics

        k_steps, k_signal = jax.random.split(key)
        carry = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        (params, target_params, opt_state, count), metrics = self.scan_gradient_steps(gradient_step, carry, k_steps)
        state = state.replace(params=params, target_params=target_params, opt_state=opt_state, gradient_steps=count)
        # Learning signal for task samplers: each env's mean absolute TD error on the fresh unroll.
        target = targets(target_params, normalize(fresh.next_obs), fresh, k_signal)
        q = self.critic(params["critic"], normalize(fresh.obs), fresh.action)  # [2, T, N]
        return state, metrics, jnp.mean(jnp.abs(q - target), axis=(0, 1))
