"""TD3+BC (Fujimoto and Gu, 2021): TD3's gradient step on dataset batches, with a behaviour-cloning
term added to the actor's objective through the off-policy base's loss-term mechanism.

The paper's actor loss is `-lambda * Q(s, pi(s)) + (pi(s) - a)^2` with `lambda = alpha / mean|Q|`.
Here it is the same objective divided by `lambda`, `-Q(s, pi(s)) + mean|Q| / alpha * (pi(s) - a)^2`:
TD3's own actor loss plus one term, the same minimiser and, under Adam, the same steps up to how
`lambda` moves between steps.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp

from ajax_tune.agents.networks import deterministic_actor_critic, init_actor_critic
from ajax_tune.agents.offline import OfflineAgent, OfflineState
from ajax_tune.agents.offpolicy import ActorTermInputs, check_bounded_box
from ajax_tune.agents.td3.learner import TD3Learner
from ajax_tune.agents.td3bc.config import TD3BCConfig


class BehaviourCloning:
    """mean|Q| / alpha * mean((pi(s) - a)^2): keeps the policy near the dataset's actions, with
    the critic's scale normalised away so one alpha fits rewards of any size."""

    name = "bc"

    def __call__(self, inputs: ActorTermInputs, hp) -> jax.Array:
        scale = jax.lax.stop_gradient(jnp.mean(jnp.abs(inputs.q))) / hp.alpha
        return scale * jnp.mean((inputs.policy_action - inputs.data_action) ** 2)


class TD3BC(OfflineAgent):
    def __init__(self, config: TD3BCConfig, observation_space: gymnasium.spaces.Box, action_space):
        check_bounded_box("td3bc", action_space)
        super().__init__(config, observation_space, action_space)
        self.action_dim = int(action_space.shape[0])
        self.actor, self.critic = deterministic_actor_critic(config, self.action_dim)
        self.learner = TD3Learner(self.actor, self.critic, self.optimizer, config.policy_delay, terms=(BehaviourCloning(),))
        self.learn_keys = self.learner.metric_keys

    def init(self, key: jax.Array) -> OfflineState:
        params = init_actor_critic(self.actor, self.critic, key, self.obs_shape, self.action_dim)
        return OfflineState(
            params=params,
            target_params=params,
            opt_state={name: self.optimizer.init(p) for name, p in params.items()},
            **self.initial_fields(),
        )

    def act(self, state: OfflineState, obs, key, deterministic: bool = False):
        action = jnp.tanh(self.actor.apply(state.params["actor"], self.obs_norm(state.obs_norm, obs)))
        return self.to_env(action), {}

    def gradient_step(self, state: OfflineState, batch, key, lr):
        carry = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        (params, target_params, opt_state, _), metrics = self.learner.step(carry, batch, key, state.hp, lr)
        return state.replace(params=params, target_params=target_params, opt_state=opt_state), metrics
