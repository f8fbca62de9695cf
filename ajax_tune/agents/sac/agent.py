"""Soft actor-critic for continuous actions, learning from a replay buffer in its own state.

Every update puts the fresh unroll into the buffer and then takes `utd_ratio * num_envs *
unroll_length` gradient steps on batches drawn from it. The buffer sits in the agent's state, so
the loop donates it, checkpoints save it, and a PBT exploit hands it to the exploiting trial
with the parameters. Until `learning_starts` env steps have been stored, actions are uniform in
the action space and updates only store: the condition reads the loop's clock, which every seed
shares, so it is a real branch that skips the gradient steps outright.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from ajax_tune.agents.base import Clock, action_scale
from ajax_tune.agents.distributions import TanhNormal
from ajax_tune.agents.hparams import Optimizer, all_finite, init_hparams, replace_hparams, scheduled
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.normalization import ObsNormalizer, RunningStats
from ajax_tune.agents.replay import ReplayBuffer
from ajax_tune.agents.sac.config import SACConfig
from ajax_tune.agents.sac.losses import actor_loss, critic_loss, sample_action, soft_target, temperature_loss
from ajax_tune.envs.base import EnvState
from ajax_tune.fields import ConfigError

LOSS_KEYS = ("loss/critic", "loss/actor", "loss/temperature", "q/mean", "q/std", "entropy",
             "grad_norm/critic", "grad_norm/actor")


@struct.dataclass
class SACState:
    params: dict  # "actor", "critic" (the twin critics stacked on a leading axis of 2), "log_alpha"
    target_critic: Any
    opt_state: dict  # one optimiser state per entry of params
    buffer: Any  # flashbax item-buffer state
    obs_norm: RunningStats
    steps: jax.Array  # int32 env steps stored since the run began (decides random acting)
    hp: dict  # traced hyperparameters


@struct.dataclass
class SACTransition:
    obs: jax.Array
    action: jax.Array  # in the policy's space, [-1, 1]
    reward: jax.Array
    terminated: jax.Array  # cuts the bootstrap; a truncation does not
    next_obs: jax.Array  # the true successor, also on the step an episode was truncated


class QNetwork(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs, action):
        return MLP(self.hidden_sizes, 1, self.activation)(jnp.concatenate([obs, action], axis=-1))[..., 0]


class SAC:
    reset_modes = ("next_step",)  # post-done steps never exist, so none can enter the buffer
    latest_metrics = ("lr", "replay/size")

    def __init__(self, config: SACConfig, observation_space: gymnasium.spaces.Box, action_space):
        if not (isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1
                and np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
            raise ConfigError(f"agent.name 'sac' needs a bounded continuous action space (a 1-D Box); "
                              f"this env's action space is {action_space}")
        self.config = config
        self.num_envs = config.num_envs
        self.unroll_length = config.unroll_length
        self.steps_per_update = config.num_envs * config.unroll_length
        self.obs_shape = tuple(observation_space.shape)
        self.action_dim = int(action_space.shape[0])
        self.dist = TanhNormal(self.action_dim)
        self.to_env = action_scale(action_space)
        self.actor = MLP(config.hidden_sizes, self.dist.param_size, config.activation, out_scale=0.01)
        self.critic = QNetwork(config.hidden_sizes, config.activation)
        self.optimizer = Optimizer()
        self.obs_norm = ObsNormalizer(self.obs_shape, config.normalize_observations)
        example = SACTransition(
            obs=jnp.zeros(self.obs_shape, jnp.float32), action=jnp.zeros((self.action_dim,), jnp.float32),
            reward=jnp.zeros((), jnp.float32), terminated=jnp.zeros((), jnp.bool_),
            next_obs=jnp.zeros(self.obs_shape, jnp.float32))
        self.buffer = ReplayBuffer(config.capacity, config.batch_size, example)

    def check_run(self, train) -> None:
        if self.config.learning_starts > train.total_timesteps:
            raise ConfigError(
                f"agent.learning_starts ({self.config.learning_starts}) is beyond the run's horizon, "
                f"train.total_timesteps ({train.total_timesteps}): SAC would never learn")

    # -- state ---------------------------------------------------------------------------

    def init(self, key: jax.Array) -> SACState:
        k_actor, k_q1, k_q2 = jax.random.split(key, 3)
        obs = jnp.zeros((1, *self.obs_shape), jnp.float32)
        action = jnp.zeros((1, self.action_dim), jnp.float32)
        # Two separate initialisations, stacked: vmapping the orthogonal initialiser would batch
        # LAPACK's QR (see the loop's note on init).
        critic = jax.tree.map(lambda a, b: jnp.stack([a, b]),
                              self.critic.init(k_q1, obs, action), self.critic.init(k_q2, obs, action))
        params = {"actor": self.actor.init(k_actor, obs), "critic": critic,
                  "log_alpha": jnp.asarray(np.log(self.config.init_alpha), jnp.float32)}
        return SACState(
            params=params,
            target_critic=critic,
            opt_state={name: self.optimizer.init(p) for name, p in params.items()},
            buffer=self.buffer.init(),
            obs_norm=self.obs_norm.init(),
            steps=jnp.zeros((), jnp.int32),
            hp=init_hparams(self.config),
        )

    def with_hparams(self, state: SACState, config: SACConfig) -> SACState:
        return state.replace(hp=replace_hparams(state.hp, config))

    def health(self, state: SACState, metrics: dict) -> dict[str, jax.Array]:
        learning = state.steps >= self.config.learning_starts  # losses are NaN until then, by design
        losses = all_finite({k: metrics[k] for k in LOSS_KEYS})
        return {"params": all_finite(state.params), "opt_state": all_finite(state.opt_state),
                "loss": losses | ~learning}

    # -- acting --------------------------------------------------------------------------

    def _q(self, critic_params, obs, action):
        """Both critics' values, `[2, ...]`."""
        return jax.vmap(self.critic.apply, in_axes=(0, None, None))(critic_params, obs, action)

    def act(self, state: SACState, obs, key, deterministic: bool = False):
        dist_params = self.actor.apply(state.params["actor"], self.obs_norm(state.obs_norm, obs))
        if deterministic:
            return self.to_env(self.dist.mode(dist_params)), {}
        k_policy, k_uniform = jax.random.split(key)
        policy = self.dist.postprocess(self.dist.sample_no_postprocessing(dist_params, k_policy))
        uniform = jax.random.uniform(k_uniform, policy.shape, policy.dtype, -1.0, 1.0)
        action = jnp.where(state.steps < self.config.learning_starts, uniform, policy)
        return self.to_env(action), {"action": action}

    def transition(self, obs, action, extras, next_state: EnvState) -> SACTransition:
        return SACTransition(obs=obs, action=extras["action"], reward=next_state.reward,
                             terminated=next_state.terminated, next_obs=next_state.obs)

    # -- learning ------------------------------------------------------------------------

    def update(self, state: SACState, batch: SACTransition, key, clock: Clock):
        state = state.replace(
            buffer=self.buffer.add(state.buffer, batch),
            obs_norm=self.obs_norm.update(state.obs_norm, batch.obs),
            steps=state.steps + self.steps_per_update,
        )
        lr = scheduled(state.hp["lr"], clock)
        # The clock is shared by all seeds, so under the seed vmap this stays a real branch.
        learning = clock.timestep + self.steps_per_update >= self.config.learning_starts
        state, metrics, signal = jax.lax.cond(
            learning, lambda: self._learn(state, batch, key, lr), lambda: self._store_only(state))
        metrics.update({"lr": lr, "alpha": jnp.exp(state.params["log_alpha"]),
                        "replay/size": self.buffer.size(state.buffer).astype(jnp.float32)})
        return state, metrics, signal

    def _store_only(self, state: SACState):
        nan = jnp.full((), jnp.nan, jnp.float32)
        return state, {k: nan for k in LOSS_KEYS}, jnp.full((self.num_envs,), jnp.nan, jnp.float32)

    def _learn(self, state: SACState, fresh: SACTransition, key, lr):
        hp = state.hp
        target_entropy = -hp["target_entropy_scale"] * self.action_dim
        normalize = lambda x: self.obs_norm(state.obs_norm, x)  # noqa: E731

        def gradient_step(carry, k):
            params, target_critic, opt_state = carry
            k_sample, k_next, k_actor = jax.random.split(k, 3)
            batch = self.buffer.sample(state.buffer, k_sample)
            obs, next_obs = normalize(batch.obs), normalize(batch.next_obs)
            alpha = jnp.exp(params["log_alpha"])

            next_action, next_log_prob = sample_action(self.actor.apply, self.dist, params["actor"], next_obs, k_next)
            target = soft_target(batch, next_action, next_log_prob, self._q(target_critic, next_obs, next_action),
                                 alpha, hp["gamma"])
            (c_loss, q), grads = jax.value_and_grad(critic_loss, has_aux=True)(
                params["critic"], self._q, obs, batch.action, target)
            critic, opt_critic, critic_norm = self.optimizer.step(params["critic"], grads, opt_state["critic"], lr,
                                                        hp["max_grad_norm"])

            (a_loss, log_prob), grads = jax.value_and_grad(actor_loss, has_aux=True)(
                params["actor"], critic, self.actor.apply, self._q, self.dist, obs, alpha, k_actor)
            actor, opt_actor, actor_norm = self.optimizer.step(params["actor"], grads, opt_state["actor"], lr,
                                                      hp["max_grad_norm"])

            t_loss, grad = jax.value_and_grad(temperature_loss)(params["log_alpha"], log_prob, target_entropy)
            log_alpha, opt_alpha, _ = self.optimizer.step(params["log_alpha"], grad, opt_state["log_alpha"], lr,
                                                          hp["max_grad_norm"])

            params = {"actor": actor, "critic": critic, "log_alpha": log_alpha}
            opt_state = {"actor": opt_actor, "critic": opt_critic, "log_alpha": opt_alpha}
            target_critic = optax.incremental_update(critic, target_critic, hp["tau"])
            metrics = {"loss/critic": c_loss, "loss/actor": a_loss, "loss/temperature": t_loss,
                       "q/mean": jnp.mean(q), "q/std": jnp.std(q), "entropy": -jnp.mean(log_prob),
                       "grad_norm/critic": critic_norm, "grad_norm/actor": actor_norm}
            return (params, target_critic, opt_state), metrics

        k_steps, k_signal = jax.random.split(key)
        (params, target_critic, opt_state), metrics = jax.lax.scan(
            gradient_step, (state.params, state.target_critic, state.opt_state),
            jax.random.split(k_steps, self.config.gradient_steps))
        state = state.replace(params=params, target_critic=target_critic, opt_state=opt_state)
        return state, jax.tree.map(jnp.mean, metrics), self._td_error(state, fresh, k_signal)

    def _td_error(self, state: SACState, fresh: SACTransition, key) -> jax.Array:
        """Mean absolute TD error of each env's fresh transitions: the learning signal task
        samplers read (how much the critics still have to learn about that env's task)."""
        obs, next_obs = self.obs_norm(state.obs_norm, fresh.obs), self.obs_norm(state.obs_norm, fresh.next_obs)
        next_action, next_log_prob = sample_action(self.actor.apply, self.dist, state.params["actor"], next_obs, key)
        target = soft_target(fresh, next_action, next_log_prob, self._q(state.target_critic, next_obs, next_action),
                             jnp.exp(state.params["log_alpha"]), state.hp["gamma"])
        q = self._q(state.params["critic"], obs, fresh.action)  # [2, T, N]
        return jnp.mean(jnp.abs(q - target), axis=(0, 1))
