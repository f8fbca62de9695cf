"""Implicit Q-learning for continuous actions, offline (`agents/offline.py`).

Each gradient step moves the value towards the target critics' expectile, the twin critics
towards `r + gamma * V(s')`, and the actor (a normal with a tanh mean and a learned,
state-independent log std) towards the dataset's actions weighted by their advantage; the target
critics follow softly. Acting is the mean: evaluation is deterministic, and IQL collects nothing.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn

from ajax_tune.agents.iql.config import IQLConfig
from ajax_tune.agents.iql.losses import advantage_weights, expectile_loss, gaussian_log_prob, value_target
from ajax_tune.agents.networks import MLP, deterministic_actor_critic
from ajax_tune.agents.offline import OfflineAgent, OfflineState
from ajax_tune.agents.offpolicy import check_bounded_box, twin_critic_loss

LOG_STD_RANGE = (-5.0, 2.0)


class ValueNet(nn.Module):
    hidden_sizes: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs):
        return MLP(self.hidden_sizes, 1, self.activation)(obs)[..., 0]


class IQL(OfflineAgent):
    learn_keys = ("loss/critic", "loss/value", "loss/actor", "q/mean", "advantage/mean", "weight/mean", "log_std/mean")

    def __init__(self, config: IQLConfig, observation_space: gymnasium.spaces.Box, action_space):
        check_bounded_box("iql", action_space)
        super().__init__(config, observation_space, action_space)
        self.action_dim = int(action_space.shape[0])
        self.actor, self.critic = deterministic_actor_critic(config, self.action_dim)  # the actor's output: a mean
        self.value = ValueNet(config.hidden_sizes, config.activation)

    def init(self, key: jax.Array) -> OfflineState:
        k_actor, k_q1, k_q2, k_value = jax.random.split(key, 4)
        obs, action = jnp.zeros((1, *self.obs_shape), jnp.float32), jnp.zeros((1, self.action_dim), jnp.float32)
        params = {
            "actor": {"mean": self.actor.init(k_actor, obs), "log_std": jnp.zeros((self.action_dim,), jnp.float32)},
            "critic": self.critic.init(k_q1, k_q2, obs, action),
            "value": self.value.init(k_value, obs),
        }
        return OfflineState(
            params=params,
            target_params=params["critic"],
            opt_state={name: self.optimizer.init(p) for name, p in params.items()},
            **self.initial_fields(),
        )

    def act(self, state: OfflineState, obs, key, deterministic: bool = False):
        mean = jnp.tanh(self.actor.apply(state.params["actor"]["mean"], self.obs_norm(state.obs_norm, obs)))
        return self.to_env(mean), {}

    def gradient_step(self, state: OfflineState, batch, key, lr):
        hp, params, opt_state = state.hp, state.params, state.opt_state
        target_q = jnp.min(self.critic(state.target_params, batch.obs, batch.action), axis=0)

        def value_loss(value_params):
            value = self.value.apply(value_params, batch.obs)
            return expectile_loss(target_q - value, hp.expectile), value

        (v_loss, value), grads = jax.value_and_grad(value_loss, has_aux=True)(params["value"])
        value_params, opt_value, _ = self.optimizer.step(params["value"], grads, opt_state["value"], lr, hp.max_grad_norm)

        target = value_target(batch, self.value.apply(value_params, batch.next_obs), hp.gamma)
        (c_loss, q), grads = jax.value_and_grad(twin_critic_loss, has_aux=True)(
            params["critic"], self.critic, batch.obs, batch.action, target
        )
        critic, opt_critic, _ = self.optimizer.step(params["critic"], grads, opt_state["critic"], lr, hp.max_grad_norm)

        weights = advantage_weights(target_q, value, hp.temperature, hp.max_weight)

        def actor_loss(actor_params):
            mean = jnp.tanh(self.actor.apply(actor_params["mean"], batch.obs))
            log_std = jnp.clip(actor_params["log_std"], *LOG_STD_RANGE)
            return -jnp.mean(weights * gaussian_log_prob(mean, log_std, batch.action))

        a_loss, grads = jax.value_and_grad(actor_loss)(params["actor"])
        actor, opt_actor, _ = self.optimizer.step(params["actor"], grads, opt_state["actor"], lr, hp.max_grad_norm)

        state = state.replace(
            params={"actor": actor, "critic": critic, "value": value_params},
            target_params=optax.incremental_update(critic, state.target_params, hp.tau),
            opt_state={"actor": opt_actor, "critic": opt_critic, "value": opt_value},
        )
        metrics = {
            "loss/critic": c_loss,
            "loss/value": v_loss,
            "loss/actor": a_loss,
            "q/mean": jnp.mean(q),
            "advantage/mean": jnp.mean(target_q - value),
            "weight/mean": jnp.mean(weights),
            "log_std/mean": jnp.mean(actor["log_std"]),
        }
        return state, metrics
