"""Soft actor-critic for continuous actions, on the off-policy base (`agents/offpolicy.py`).

Until `learning_starts` env steps have been stored, actions are uniform in the action space;
then every update takes its gradient steps on the twin critics, the actor and the entropy
temperature, one after another with separate optimisers, and moves the target critics softly.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from ajax_tune.agents.base import action_scale
from ajax_tune.agents.distributions import TanhNormal
from ajax_tune.agents.networks import MLP, TwinQ
from ajax_tune.agents.offpolicy import OffPolicyAgent, OffPolicyState, ReplayTransition, check_bounded_box, twin_critic_loss
from ajax_tune.agents.sac.config import SACConfig
from ajax_tune.agents.sac.losses import actor_loss, sample_action, soft_target, temperature_loss


@struct.dataclass
class SACState(OffPolicyState):
    """`params`: "actor", "critic" (the twin critics stacked on a leading axis of 2) and
    "log_alpha", each with its own optimiser state; `target_params`: the target critics."""


class SAC(OffPolicyAgent):
    learn_keys = (
        "loss/critic",
        "loss/actor",
        "loss/temperature",
        "q/mean",
        "q/std",
        "entropy",
        "grad_norm/critic",
        "grad_norm/actor",
    )
    metric_keys = (*learn_keys, "alpha", "lr", "replay/size")

    def __init__(self, config: SACConfig, observation_space: gymnasium.spaces.Box, action_space):
        check_bounded_box("sac", action_space)
        self.action_dim = int(action_space.shape[0])
        super().__init__(config, observation_space, jax.ShapeDtypeStruct((self.action_dim,), jnp.float32))
        self.dist = TanhNormal(self.action_dim)
        self.to_env = action_scale(action_space)
        self.actor = MLP(config.hidden_sizes, self.dist.param_size, config.activation, out_scale=0.01)
        self.critic = TwinQ(config.hidden_sizes, config.activation)

    def init(self, key: jax.Array) -> SACState:
        k_actor, k_q1, k_q2 = jax.random.split(key, 3)
        obs = jnp.zeros((1, *self.obs_shape), jnp.float32)
        action = jnp.zeros((1, self.action_dim), jnp.float32)
        critic = self.critic.init(k_q1, k_q2, obs, action)
        params = {
            "actor": self.actor.init(k_actor, obs),
            "critic": critic,
            "log_alpha": jnp.asarray(np.log(self.config.init_alpha), jnp.float32),
        }
        return SACState(
            params=params,
            target_params=critic,
            opt_state={name: self.optimizer.init(p) for name, p in params.items()},
            **self.initial_fields(),
        )

    # -- acting --------------------------------------------------------------------------

    def act(self, state: SACState, obs, key, deterministic: bool = False):
        dist_params = self.actor.apply(state.params["actor"], self.obs_norm(state.obs_norm, obs))
        if deterministic:
            return self.to_env(self.dist.mode(dist_params)), {}
        k_policy, k_uniform = jax.random.split(key)
        policy = self.dist.postprocess(self.dist.sample_no_postprocessing(dist_params, k_policy))
        uniform = jax.random.uniform(k_uniform, policy.shape, policy.dtype, -1.0, 1.0)
        action = jnp.where(state.timestep < self.config.learning_starts, uniform, policy)
        return self.to_env(action), {"action": action}

    def stored_action(self, action, extras):
        return extras["action"]  # in the policy's space, [-1, 1]

    # -- learning ------------------------------------------------------------------------

    def setting_metrics(self, state: SACState, clock):
        return {"alpha": jnp.exp(state.params["log_alpha"])}

    def learn(self, state: SACState, fresh: ReplayTransition, key, lr):
        hp = state.hp
        target_entropy = -hp.target_entropy_scale * self.action_dim
        normalize = lambda x: self.obs_norm(state.obs_norm, x)  # noqa: E731

        def gradient_step(carry, k):
            params, target_critic, opt_state = carry
            k_sample, k_next, k_actor = jax.random.split(k, 3)
            batch = self.buffer.sample(state.buffer, k_sample)
            obs, next_obs = normalize(batch.obs), normalize(batch.next_obs)
            alpha = jnp.exp(params["log_alpha"])

            next_action, next_log_prob = sample_action(self.actor.apply, self.dist, params["actor"], next_obs, k_next)
            target = soft_target(
                batch, next_action, next_log_prob, self.critic(target_critic, next_obs, next_action), alpha, hp.gamma
            )
            (c_loss, q), grads = jax.value_and_grad(twin_critic_loss, has_aux=True)(
                params["critic"], self.critic, obs, batch.action, target
            )
            critic, opt_critic, critic_norm = self.optimizer.step(
                params["critic"], grads, opt_state["critic"], lr, hp.max_grad_norm
            )

            (a_loss, log_prob), grads = jax.value_and_grad(actor_loss, has_aux=True)(
                params["actor"], critic, self.actor.apply, self.critic, self.dist, obs, alpha, k_actor
            )
            actor, opt_actor, actor_norm = self.optimizer.step(params["actor"], grads, opt_state["actor"], lr, hp.max_grad_norm)

            t_loss, grad = jax.value_and_grad(temperature_loss)(params["log_alpha"], log_prob, target_entropy)
            log_alpha, opt_alpha, _ = self.optimizer.step(params["log_alpha"], grad, opt_state["log_alpha"], lr, hp.max_grad_norm)

            params = {"actor": actor, "critic": critic, "log_alpha": log_alpha}
            opt_state = {"actor": opt_actor, "critic": opt_critic, "log_alpha": opt_alpha}
            target_critic = optax.incremental_update(critic, target_critic, hp.tau)
            metrics = {
                "loss/critic": c_loss,
                "loss/actor": a_loss,
                "loss/temperature": t_loss,
                "q/mean": jnp.mean(q),
                "q/std": jnp.std(q),
                "entropy": -jnp.mean(log_prob),
                "grad_norm/critic": critic_norm,
                "grad_norm/actor": actor_norm,
            }
            return (params, target_critic, opt_state), metrics

        k_steps, k_signal = jax.random.split(key)
        (params, target_critic, opt_state), metrics = self.scan_gradient_steps(
            gradient_step, (state.params, state.target_params, state.opt_state), k_steps
        )
        state = state.replace(params=params, target_params=target_critic, opt_state=opt_state)
        return state, metrics, self._td_error(state, fresh, k_signal)

    def _td_error(self, state: SACState, fresh: ReplayTransition, key) -> jax.Array:
        """Mean absolute TD error of each env's fresh transitions: the learning signal task
        samplers read (how much the critics still have to learn about that env's task)."""
        obs, next_obs = self.obs_norm(state.obs_norm, fresh.obs), self.obs_norm(state.obs_norm, fresh.next_obs)
        next_action, next_log_prob = sample_action(self.actor.apply, self.dist, state.params["actor"], next_obs, key)
        target = soft_target(
            fresh,
            next_action,
            next_log_prob,
            self.critic(state.target_params, next_obs, next_action),
            jnp.exp(state.params["log_alpha"]),
            state.hp.gamma,
        )
        q = self.critic(state.params["critic"], obs, fresh.action)  # [2, T, N]
        return jnp.mean(jnp.abs(q - target), axis=(0, 1))
