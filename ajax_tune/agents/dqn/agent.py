"""Double DQN with a replay buffer in its state, for discrete actions.

Every update inserts the fresh unroll into the buffer, then (once `learning_starts` env steps
have been collected) takes a fixed number of gradient steps on batches sampled from it, moving
the target network towards the online one after every `target_update_every` of them. The buffer,
both networks and the exploration clock live in the state, so a checkpoint or a PBT exploit
carries all of them and a split run is bit-identical to one long run.

Acting is epsilon-greedy. `act` gets no clock, so the state keeps the timestep its next unroll
starts at (written by `update` from the loop's clock) and the run's horizon; epsilon is computed
from those and the traced schedule in the state, so a changed schedule applies from the current
timestep on.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax_tune.agents.base import Clock
from ajax_tune.agents.dqn.config import DQNConfig
from ajax_tune.agents.dqn.losses import chosen, double_q_target, dqn_loss
from ajax_tune.agents.hparams import Optimizer, all_finite, init_hparams, replace_hparams, scheduled
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.normalization import ObsNormalizer, RunningStats
from ajax_tune.agents.replay import ReplayBuffer
from ajax_tune.envs.base import EnvState
from ajax_tune.fields import ConfigError


@struct.dataclass
class DQNState:
    params: dict
    target_params: dict
    opt_state: Any
    obs_norm: RunningStats
    buffer: Any  # flashbax buffer state: `capacity` transitions
    timestep: jax.Array  # float32 env steps per seed before the next unroll (epsilon's clock)
    horizon: jax.Array  # float32 total_timesteps, as the last update saw it
    gradient_steps: jax.Array  # int32 gradient steps taken since the run began
    hp: dict  # traced hyperparameters


@struct.dataclass
class DQNTransition:
    obs: jax.Array
    action: jax.Array  # int32 index
    reward: jax.Array
    terminated: jax.Array  # a truncated step is not terminated: it bootstraps
    next_obs: jax.Array  # the true successor, also the real final observation on a truncation


def epsilon(hp: dict, timestep: jax.Array, horizon: jax.Array) -> jax.Array:
    """Linear decay from `epsilon_start` to `epsilon_end` over the first
    `epsilon_decay_fraction` of the run, then flat (a fraction of 0 means no decay)."""
    span = hp["epsilon_decay_fraction"] * horizon
    remaining = jnp.where(span > 0, jnp.clip(1.0 - timestep / jnp.where(span > 0, span, 1.0), 0.0, 1.0), 0.0)
    return hp["epsilon_end"] + (hp["epsilon_start"] - hp["epsilon_end"]) * remaining


class DQN:
    reset_modes = ("next_step",)  # post-done steps would enter the buffer otherwise
    latest_metrics = ("lr", "epsilon", "replay/size")

    def __init__(self, config: DQNConfig, observation_space: gymnasium.spaces.Box, action_space):
        if not isinstance(action_space, gymnasium.spaces.Discrete):
            raise ConfigError(f"agent.name 'dqn' needs a discrete action space; this env's is {action_space}")
        self.config = config
        self.num_envs = config.num_envs
        self.unroll_length = config.unroll_length
        self.steps_per_update = config.num_envs * config.unroll_length
        self.num_actions = int(action_space.n)
        self.obs_shape = tuple(observation_space.shape)
        self.q = MLP(config.hidden_sizes, self.num_actions, config.activation, out_scale=1.0)
        self.optimizer = Optimizer()
        self.obs_norm = ObsNormalizer(self.obs_shape, config.normalize_observations)
        example = DQNTransition(
            obs=jnp.zeros(self.obs_shape, jnp.float32), action=jnp.zeros((), jnp.int32),
            reward=jnp.zeros((), jnp.float32), terminated=jnp.zeros((), jnp.bool_),
            next_obs=jnp.zeros(self.obs_shape, jnp.float32))
        self.buffer = ReplayBuffer(config.capacity, config.batch_size, example)

    def check_run(self, train_config) -> None:
        cfg = self.config
        if cfg.learning_starts >= train_config.total_timesteps:
            raise ConfigError(
                f"agent.learning_starts ({cfg.learning_starts}) must be below train.total_timesteps "
                f"({train_config.total_timesteps}): the run would never learn")

    # -- state ---------------------------------------------------------------------------

    def init(self, key: jax.Array) -> DQNState:
        params = self.q.init(key, jnp.zeros((1, *self.obs_shape), jnp.float32))
        return DQNState(
            params=params,
            target_params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=self.obs_norm.init(),
            buffer=self.buffer.init(),
            timestep=jnp.zeros((), jnp.float32),
            horizon=jnp.ones((), jnp.float32),  # progress is 0 at timestep 0 whatever the horizon
            gradient_steps=jnp.zeros((), jnp.int32),
            hp=init_hparams(self.config),
        )

    def with_hparams(self, state: DQNState, config: DQNConfig) -> DQNState:
        return state.replace(hp=replace_hparams(state.hp, config))

    def health(self, state: DQNState, metrics: dict) -> dict[str, jax.Array]:
        learning = state.gradient_steps > 0  # before that the loss is NaN by design (nothing learned)
        return {"params": all_finite((state.params, state.target_params)), "opt_state": all_finite(state.opt_state),
                "loss": ~learning | jnp.isfinite(metrics["loss/q"])}

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

    def transition(self, obs, action, extras, next_state: EnvState) -> DQNTransition:
        return DQNTransition(obs=obs, action=action.astype(jnp.int32), reward=next_state.reward,
                             terminated=next_state.terminated, next_obs=next_state.obs)

    # -- learning ------------------------------------------------------------------------

    def update(self, state: DQNState, batch: DQNTransition, key, clock: Clock):
        cfg, hp = self.config, state.hp
        state = state.replace(obs_norm=self.obs_norm.update(state.obs_norm, batch.obs),
                              buffer=self.buffer.add(state.buffer, batch))
        lr = scheduled(hp["lr"], clock)
        q_fn = lambda params, obs: self._q(params, state.obs_norm, obs)  # noqa: E731
        # The clock is shared by all seeds, so this is a real branch even under the seed vmap.
        learning = clock.timestep + self.steps_per_update >= cfg.learning_starts

        def gradient_step(carry, k):
            params, target_params, opt_state, count = carry
            sample = self.buffer.sample(state.buffer, k)
            grads, metrics = jax.grad(dqn_loss, has_aux=True)(params, target_params, sample, hp["gamma"],
                                                              hp["huber_delta"], q_fn)
            params, opt_state, grad_norm = self.optimizer.step(params, grads, opt_state, lr, hp["max_grad_norm"])
            count = count + 1
            moved = optax.incremental_update(params, target_params, hp["tau"])
            if cfg.target_update_every > 1:
                due = count % cfg.target_update_every == 0
                moved = jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target_params)
            return (params, moved, opt_state, count), {**metrics, "grad_norm": grad_norm}

        def learn(carry):
            carry, metrics = jax.lax.scan(gradient_step, carry, jax.random.split(key, cfg.gradient_steps))
            return carry, jax.tree.map(jnp.mean, metrics)

        def wait(carry):
            nan = jnp.full((), jnp.nan, jnp.float32)
            return carry, {"loss/q": nan, "q/mean": nan, "q/max": nan, "grad_norm": nan}

        carry = (state.params, state.target_params, state.opt_state, state.gradient_steps)
        (params, target_params, opt_state, count), metrics = jax.lax.cond(learning, learn, wait, carry)

        # Learning signal for task samplers: each env's mean absolute TD error on the fresh unroll.
        td = chosen(q_fn(params, batch.obs), batch.action) - double_q_target(
            batch.reward, batch.terminated, q_fn(params, batch.next_obs), q_fn(target_params, batch.next_obs),
            hp["gamma"])
        signal = jnp.where(learning, jnp.mean(jnp.abs(td), axis=0), jnp.nan)

        metrics["lr"] = lr
        metrics["epsilon"] = epsilon(hp, clock.timestep, clock.horizon)
        metrics["replay/size"] = self.buffer.size(state.buffer).astype(jnp.float32)
        state = state.replace(params=params, target_params=target_params, opt_state=opt_state, gradient_steps=count,
                              timestep=clock.timestep + self.steps_per_update, horizon=clock.horizon)
        return state, metrics, signal
