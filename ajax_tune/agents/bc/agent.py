"""Behaviour cloning, the baseline every offline agent is measured against: the policy regresses
on the dataset's actions (squared error in [-1, 1] for a Box, cross-entropy over a Discrete's
actions), whatever their returns. Acting is deterministic: the regressed action, or the most
likely one."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import optax

from ajax_tune.agents.bc.config import BCConfig
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.offline import OfflineAgent, OfflineState
from ajax_tune.errors import ConfigError


class BC(OfflineAgent):
    learn_keys = ("loss/actor", "grad_norm/actor")

    def __init__(self, config: BCConfig, observation_space: gymnasium.spaces.Box, action_space):
        super().__init__(config, observation_space, action_space)
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.continuous, out = False, int(action_space.n)
        elif isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1:
            self.continuous, out = True, int(action_space.shape[0])
        else:
            raise ConfigError(f"agent.name 'bc' needs a Discrete or a bounded 1-D Box action space; this env's is {action_space}")
        self.policy = MLP(config.hidden_sizes, out, config.activation, out_scale=0.01)

    def init(self, key: jax.Array) -> OfflineState:
        params = self.policy.init(key, jnp.zeros((1, *self.obs_shape), jnp.float32))
        return OfflineState(params=params, target_params={}, opt_state=self.optimizer.init(params), **self.initial_fields())

    def act(self, state: OfflineState, obs, key, deterministic: bool = False):
        out = self.policy.apply(state.params, self.obs_norm(state.obs_norm, obs))
        return (self.to_env(jnp.tanh(out)) if self.continuous else jnp.argmax(out, axis=-1)), {}

    def gradient_step(self, state: OfflineState, batch, key, lr):
        def loss(params):
            out = self.policy.apply(params, batch.obs)
            if self.continuous:
                return jnp.mean((jnp.tanh(out) - batch.action) ** 2)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(out, batch.action))

        value, grads = jax.value_and_grad(loss)(state.params)
        params, opt_state, norm = self.optimizer.step(state.params, grads, state.opt_state, lr, state.hp.max_grad_norm)
        return state.replace(params=params, opt_state=opt_state), {"loss/actor": value, "grad_norm/actor": norm}
