"""TD3 for continuous actions, on the off-policy base (`agents/offpolicy.py`).

Twin critics learn at every gradient step; the deterministic actor and both targets move on every
`policy_delay`-th one, so the actor climbs a critic that has settled a little. Acting adds
Gaussian noise to the actor's action, and is uniform until `learning_starts`.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.agents.base import action_scale
from ajax_tune.agents.networks import deterministic_actor_critic, init_actor_critic
from ajax_tune.agents.offpolicy import OffPolicyAgent, OffPolicyState, ReplayTransition, check_bounded_box
from ajax_tune.agents.td3.config import TD3Config
from ajax_tune.agents.td3.learner import TD3Learner


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
        self.actor, self.critic = deterministic_actor_critic(config, self.action_dim)
        self.learner = TD3Learner(self.actor, self.critic, self.optimizer, config.policy_delay)

    def init(self, key: jax.Array) -> TD3State:
        params = init_actor_critic(self.actor, self.critic, key, self.obs_shape, self.action_dim)
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

        def gradient_step(carry, k):
            k_sample, k_noise = jax.random.split(k)
            batch = self.buffer.sample(state.buffer, k_sample)
            batch = batch.replace(obs=normalize(batch.obs), next_obs=normalize(batch.next_obs))
            return self.learner.step(carry, batch, k_noise, hp, lr)

        k_steps, k_signal = jax.random.split(key)
        carry = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        (params, target_params, opt_state, count), metrics = self.scan_gradient_steps(gradient_step, carry, k_steps)
        state = state.replace(params=params, target_params=target_params, opt_state=opt_state, gradient_steps=count)
        # Learning signal for task samplers: each env's mean absolute TD error on the fresh unroll.
        target = self.learner.target(target_params, normalize(fresh.next_obs), fresh, k_signal, hp)
        q = self.critic(params["critic"], normalize(fresh.obs), fresh.action)  # [2, T, N]
        return state, metrics, jnp.mean(jnp.abs(q - target), axis=(0, 1))
