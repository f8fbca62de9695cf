"""Double DQN for discrete actions, on the off-policy base (`agents/offpolicy.py`).

Once `learning_starts` env steps have been collected, every update takes its gradient steps on
batches sampled from the buffer, moving the target network towards the online one after every
`target_update_every` of them.

Acting is epsilon-greedy. `act` gets no clock, so it reads the timestep its unroll starts at and
the run's horizon from the state (written by every update); epsilon is computed from those and
the traced schedule in the state, so a changed schedule applies from the current timestep on.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax_tune.agents.dqn.config import DQNConfig, DQNHparams
from ajax_tune.agents.dqn.losses import chosen, double_q_target, dqn_loss
from ajax_tune.agents.encoders import encoded
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.normalization import RunningStats
from ajax_tune.agents.offpolicy import OffPolicyAgent, OffPolicyState, ReplayTransition
from ajax_tune.errors import ConfigError


@struct.dataclass
class DQNState(OffPolicyState):
    gradient_steps: jax.Array  # int32 gradient steps taken since the run began (the target's cadence)


def epsilon(hp: DQNHparams, timestep: jax.Array, horizon: jax.Array) -> jax.Array:
    """Linear decay from `epsilon_start` to `epsilon_end` over the first
    `epsilon_decay_fraction` of the run, then flat (a fraction of 0 means no decay)."""
    span = hp.epsilon_decay_fraction * horizon
    remaining = jnp.where(span > 0, jnp.clip(1.0 - timestep / jnp.where(span > 0, span, 1.0), 0.0, 1.0), 0.0)
    return hp.epsilon_end + (hp.epsilon_start - hp.epsilon_end) * remaining


class DQN(OffPolicyAgent):
    learn_keys = ("loss/q", "q/mean", "q/max", "grad_norm")
    metric_keys = (*learn_keys, "epsilon", "lr", "replay/size")
    latest_metrics = ("lr", "epsilon", "replay/size")

    def __init__(self, config: DQNConfig, observation_space: gymnasium.spaces.Box, action_space, image_shape=None):
        if not isinstance(action_space, gymnasium.spaces.Discrete):
            raise ConfigError(f"agent.name 'dqn' needs a discrete action space; this env's is {action_space}")
        super().__init__(config, observation_space, jax.ShapeDtypeStruct((), jnp.int32))
        self.num_actions = int(action_space.n)
        self.image_shape = image_shape  # the env's (`agents/encoders.py`), read by `agent.encoder`
        self.q = encoded(
            config.encoder, image_shape, MLP(config.hidden_sizes, self.num_actions, config.activation, out_scale=1.0)
        )

    def init(self, key: jax.Array) -> DQNState:
        params = self.q.init(key, jnp.zeros((1, *self.obs_shape), jnp.float32))
        return DQNState(
            params=params,
            target_params=params,
            opt_state=self.optimizer.init(params),
            gradient_steps=jnp.zeros((), jnp.int32),
            **self.initial_fields(),
        )

    # -- acting --------------------------------------------------------------------------

    def _q(self, params, stats: RunningStats, obs):
        return self.q.apply(params, self.obs_norm(stats, obs))

    def act(self, state: DQNState, obs, key, deterministic: bool = False):
        greedy = jnp.argmax(self._q(state.params, state.obs_norm, obs), axis=-1).astype(jnp.int32)
        if deterministic:
            return greedy, {}
        k_explore, k_action = jax.random.split(key)
        explore = jax.random.uniform(k_explore, greedy.shape) < epsilon(state.hp, state.timestep, state.horizon)
        uniform = jax.random.randint(k_action, greedy.shape, 0, self.num_actions, jnp.int32)
        return jnp.where(explore, uniform, greedy), {}

    def stored_action(self, action, extras):
        return action.astype(jnp.int32)

    # -- learning ------------------------------------------------------------------------

    def setting_metrics(self, state: DQNState, clock):
        return {"epsilon": epsilon(state.hp, clock.timestep, clock.horizon)}  # the one this unroll collected with

    def learn(self, state: DQNState, fresh: ReplayTransition, key, lr):
        cfg, hp = self.config, state.hp
        q_fn = lambda params, obs: self._q(params, state.obs_norm, obs)  # noqa: E731

        def gradient_step(carry, k):
            params, target_params, opt_state, count = carry
            sample = self.buffer.sample(state.buffer, k)
            grads, metrics = jax.grad(dqn_loss, has_aux=True)(params, target_params, sample, hp.gamma, hp.huber_delta, q_fn)
            params, opt_state, grad_norm = self.optimizer.step(params, grads, opt_state, lr, hp.max_grad_norm)
            count = count + 1
            moved = optax.incremental_update(params, target_params, hp.tau)
            if cfg.target_update_every > 1:
                due = count % cfg.target_update_every == 0
                moved = jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target_params)
            return (params, moved, opt_state, count), {**metrics, "grad_norm": grad_norm}

        carry = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        (params, target_params, opt_state, count), metrics = self.scan_gradient_steps(gradient_step, carry, key)
        # Learning signal for task samplers: each env's mean absolute TD error on the fresh unroll.
        td = chosen(q_fn(params, fresh.obs), fresh.action) - double_q_target(
            fresh.reward, fresh.terminated, q_fn(params, fresh.next_obs), q_fn(target_params, fresh.next_obs), hp.gamma
        )
        state = state.replace(params=params, target_params=target_params, opt_state=opt_state, gradient_steps=count)
        return state, metrics, jnp.mean(jnp.abs(td), axis=0)
