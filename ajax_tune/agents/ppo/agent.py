"""Proximal policy optimisation for discrete and continuous actions.

The agent supplies `init`, `act` and `update`; the training loop collects rollouts and calls
them. Traced hyperparameters live in `PPOState.hp` as arrays, so Tune can change them between
calls; the learning rate, gradient clipping and coefficients are therefore applied by hand
rather than baked into an optax chain.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import optax
from brax.training.acme import running_statistics
from flax import struct

from ajax_tune.agents import distributions
from ajax_tune.agents.base import Clock, Rollout, action_scale
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.ppo.config import PPOConfig
from ajax_tune.agents.ppo.losses import gae, ppo_loss
from ajax_tune.fields import traced_values
from ajax_tune.schedules import learning_rate


@struct.dataclass
class PPOState:
    params: dict
    opt_state: Any
    obs_norm: running_statistics.RunningStatisticsState
    return_norm: running_statistics.RunningStatisticsState
    return_acc: jax.Array  # [num_envs] discounted return so far, for reward scaling
    hp: dict  # traced hyperparameters


class PPO:
    def __init__(self, config: PPOConfig, observation_space: gymnasium.spaces.Box, action_space):
        self.config = config
        self.num_envs = config.num_envs
        self.unroll_length = config.unroll_length
        self.obs_shape = tuple(observation_space.shape)
        self.dist = distributions.for_space(action_space)
        self.to_env = action_scale(action_space)
        self.policy = MLP(config.hidden_sizes, self.dist.param_size, config.activation, out_scale=0.01)
        self.value = MLP(config.hidden_sizes, 1, config.activation, out_scale=1.0)
        self.optimizer = optax.scale_by_adam(eps=1e-5)

    # -- state ---------------------------------------------------------------------------

    def init(self, key: jax.Array) -> PPOState:
        k_policy, k_value = jax.random.split(key)
        dummy = jnp.zeros((1, *self.obs_shape), jnp.float32)
        params = {
            "policy": self.policy.init(k_policy, dummy),
            "value": self.value.init(k_value, dummy),
        }
        return PPOState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=running_statistics.init_state(jnp.zeros(self.obs_shape, jnp.float32)),
            return_norm=running_statistics.init_state(jnp.zeros((), jnp.float32)),
            return_acc=jnp.zeros((self.num_envs,), jnp.float32),
            hp=traced_values(self.config),
        )

    def with_hparams(self, state: PPOState, config: PPOConfig) -> PPOState:
        """The same state under new traced hyperparameters (static ones must not differ)."""
        hp = jax.tree.map(lambda old, new: jnp.broadcast_to(new, jnp.shape(old)).astype(old.dtype),
                          state.hp, traced_values(config))
        return state.replace(hp=hp)

    def learning_rate(self, state: PPOState, clock: Clock) -> jax.Array:
        return learning_rate(state.hp["lr"], clock.timestep, clock.horizon)

    # -- acting --------------------------------------------------------------------------

    def _normalize(self, state: PPOState, obs):
        if not self.config.normalize_observations:
            return obs
        return running_statistics.normalize(obs, state.obs_norm)

    def _policy(self, params, obs):
        return self.policy.apply(params, obs)

    def _value(self, params, obs):
        return self.value.apply(params, obs)[..., 0]

    def act(self, state: PPOState, obs, key, deterministic: bool = False):
        logits = self._policy(state.params["policy"], self._normalize(state, obs))
        if deterministic:
            return self.to_env(self.dist.mode(logits)), {}
        raw = self.dist.sample_no_postprocessing(logits, key)
        extras = {"raw_action": raw, "log_prob": self.dist.log_prob(logits, raw)}
        return self.to_env(self.dist.postprocess(raw)), extras

    # -- learning ------------------------------------------------------------------------

    def _scale_rewards(self, state: PPOState, rollout: Rollout, mask):
        gamma = state.hp["gamma"]

        def accumulate(acc, xs):
            reward, done = xs
            acc = acc * gamma + reward
            return jnp.where(done, 0.0, acc), acc

        done = rollout.terminated | rollout.truncated
        return_acc, returns = jax.lax.scan(accumulate, state.return_acc, (rollout.reward, done))
        return_norm = running_statistics.update(state.return_norm, returns.reshape(-1), weights=mask.reshape(-1))
        return rollout.reward / (return_norm.std + 1e-8), return_acc, return_norm

    def update(self, state: PPOState, rollout: Rollout, key, clock: Clock):
        cfg, hp = self.config, state.hp
        mask = (~rollout.post_done).astype(jnp.float32)
        if cfg.normalize_observations:
            flat_obs = rollout.obs.reshape(-1, *self.obs_shape)
            state = state.replace(obs_norm=running_statistics.update(state.obs_norm, flat_obs, weights=mask.reshape(-1)))
        reward = rollout.reward
        if cfg.normalize_rewards:
            reward, return_acc, return_norm = self._scale_rewards(state, rollout, mask)
            state = state.replace(return_acc=return_acc, return_norm=return_norm)

        obs = self._normalize(state, rollout.obs)
        values = self._value(state.params["value"], jnp.concatenate([obs, self._normalize(state, rollout.last_obs)[None]]))
        advantage, target = gae(reward, values[:-1], values[1:], rollout.terminated, rollout.truncated,
                                hp["gamma"], hp["gae_lambda"])
        batch = {
            "obs": obs, "action": rollout.action, "log_prob": rollout.log_prob,
            "advantage": advantage, "target": target, "mask": mask,
        }
        batch = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), batch)
        lr = self.learning_rate(state, clock)

        def minibatch_step(carry, xs):
            params, opt_state = carry
            minibatch, k = xs
            grads, metrics = jax.grad(ppo_loss, has_aux=True)(
                params, minibatch, hp, k, self._policy, self._value, self.dist)
            grad_norm = optax.global_norm(grads)
            grads = jax.tree.map(lambda g: g * jnp.minimum(1.0, hp["max_grad_norm"] / (grad_norm + 1e-6)), grads)
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, jax.tree.map(lambda u: -lr * u, updates))
            return (params, opt_state), {**metrics, "grad_norm": grad_norm}

        def epoch(carry, k):
            k_perm, k_loss = jax.random.split(k)
            size = batch["mask"].shape[0]
            perm = jax.random.permutation(k_perm, size)
            shuffled = jax.tree.map(
                lambda x: x[perm].reshape(cfg.num_minibatches, -1, *x.shape[1:]), batch)
            keys = jax.random.split(k_loss, cfg.num_minibatches)
            return jax.lax.scan(minibatch_step, carry, (shuffled, keys))

        (params, opt_state), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(key, cfg.update_epochs))
        metrics = jax.tree.map(jnp.mean, metrics)
        metrics["lr"] = lr
        return state.replace(params=params, opt_state=opt_state), metrics
