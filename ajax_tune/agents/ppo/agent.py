"""Proximal policy optimisation for discrete and continuous actions.

PPO learns from the fresh unroll itself: `transition` keeps what the clipped objective needs
(the sampled action before squashing and its log-probability) and what GAE needs (reward, the
two ways an episode ends, the true successor observation, and whether the step was real).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.agents.base import AgentBase, Clock, action_scale
from ajax_tune.agents.distributions import for_space
from ajax_tune.agents.encoders import encoded
from ajax_tune.agents.hparams import Optimizer, all_finite, init_hparams
from ajax_tune.agents.networks import MLP
from ajax_tune.agents.normalization import RunningNormalizer, RunningStats
from ajax_tune.agents.ppo.config import PPOConfig, PPOHparams
from ajax_tune.agents.ppo.losses import gae, positive_advantage, ppo_loss, successor_values
from ajax_tune.agents.shuffle import permutation
from ajax_tune.envs.base import EnvState
from ajax_tune.errors import ConfigError


@struct.dataclass
class PPOState:
    params: dict
    opt_state: Any
    obs_norm: RunningStats
    return_norm: RunningStats
    return_acc: jax.Array  # [num_envs] discounted return so far, for reward scaling
    hp: PPOHparams  # traced hyperparameters


@struct.dataclass
class PPOTransition:
    obs: jax.Array
    action: jax.Array  # as the policy sampled it (before squashing to the env's range)
    log_prob: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    valid: jax.Array  # false for steps of an env whose episode had already ended
    next_obs: jax.Array  # the true successor, also when the env is reset right after
    # What the recurrent form records while acting, so that nothing replays the unroll for them:
    value: Any = None  # the value of each step under the parameters that collected it
    after: Any = None  # the carry each step left (before any reset), for a successor of its own
    gates: Any = None  # the LSTM's gate activations, for the update's first gradient step


class PPO(AgentBase):
    reset_modes = ("next_step", "unroll_start")
    learning_signal_is_free = True  # a masked mean of the advantages the update computes anyway
    metric_keys = ("loss/policy", "loss/value", "loss/entropy", "loss/approx_kl", "loss/clip_fraction", "grad_norm", "lr")

    #: other forms of PPO by the config setting that selects them; a subclass declares its own
    #: (`class RecurrentPPO(PPO, form="recurrent")`), so this module imports none of them.
    forms: dict[str, type] = {}

    def __init_subclass__(cls, form: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if form is not None:
            PPO.forms[form] = cls

    @classmethod
    def form(cls, config: PPOConfig) -> type:
        """One agent name, two forms: a config with `recurrent` set builds the recurrent one."""
        return PPO.forms["recurrent"] if cls is PPO and config.recurrent is not None else cls

    def __init__(self, config: PPOConfig, observation_space: gymnasium.spaces.Box, action_space, image_shape=None):
        if type(self) is PPO and config.recurrent is not None:
            raise ConfigError("agent.recurrent is set: build the recurrent form, PPO.form(config), or use make_agent")
        super().__init__(config)
        self.obs_shape = tuple(observation_space.shape)
        self.image_shape = image_shape  # the env's (`agents/encoders.py`), read by `agent.encoder`
        self.dist = for_space(action_space)
        self.to_env = action_scale(action_space)
        self.policy = MLP(config.hidden_sizes, self.dist.param_size, config.activation, out_scale=0.01)
        self.value = MLP(config.hidden_sizes, 1, config.activation, out_scale=1.0)
        if config.recurrent is None:  # the recurrent form's encoder sits before its cell
            self.policy = encoded(config.encoder, image_shape, self.policy)
            self.value = encoded(config.encoder, image_shape, self.value)
        self.optimizer = Optimizer(eps=1e-5)
        self.obs_norm = RunningNormalizer(self.obs_shape, config.normalize_observations)
        self.return_norm = RunningNormalizer((), config.normalize_rewards)  # of the discounted return

    # -- state ---------------------------------------------------------------------------

    def init(self, key: jax.Array) -> PPOState:
        k_policy, k_value = jax.random.split(key)
        dummy = jnp.zeros((1, *self.obs_shape), jnp.float32)
        params = {"policy": self.policy.init(k_policy, dummy), "value": self.value.init(k_value, dummy)}
        return self._fresh_state(params)

    def _fresh_state(self, params) -> PPOState:
        """A fresh state around freshly initialised `params`."""
        return PPOState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_norm=self.obs_norm.init(),
            return_norm=self.return_norm.init(),
            return_acc=jnp.zeros((self.num_envs,), jnp.float32),
            hp=init_hparams(self.config),
        )

    def health(self, state: PPOState, metrics: dict) -> dict[str, jax.Array]:
        return {"params": all_finite(state.params), "opt_state": all_finite(state.opt_state), "loss": all_finite(metrics)}

    # -- acting --------------------------------------------------------------------------

    def _value(self, params, obs):
        return self.value.apply(params, obs)[..., 0]

    def act(self, state: PPOState, obs, key, deterministic: bool = False):
        logits = self.policy.apply(state.params["policy"], self.obs_norm(state.obs_norm, obs))
        if deterministic:
            return self.to_env(self.dist.mode(logits)), {}
        raw = self.dist.sample_no_postprocessing(logits, key)
        extras = {"raw_action": raw, "log_prob": self.dist.log_prob(logits, raw)}
        return self.to_env(self.dist.postprocess(raw)), extras

    def transition(self, obs, action, extras, next_state: EnvState) -> PPOTransition:
        return PPOTransition(
            obs=obs,
            action=extras["raw_action"],
            log_prob=extras["log_prob"],
            reward=next_state.reward,
            terminated=next_state.terminated,
            truncated=next_state.truncated,
            valid=~next_state.episode.post_done,
            next_obs=next_state.obs,
        )

    # -- learning ------------------------------------------------------------------------

    def _scale_rewards(self, state: PPOState, batch: PPOTransition, mask):
        gamma = state.hp.gamma

        def accumulate(acc, xs):
            reward, done = xs
            acc = acc * gamma + reward
            return jnp.where(done, 0.0, acc), acc

        done = batch.terminated | batch.truncated
        return_acc, returns = jax.lax.scan(accumulate, state.return_acc, (batch.reward, done))
        return_norm = self.return_norm.update(state.return_norm, returns, mask)
        return batch.reward / (return_norm.std + 1e-8), return_acc, return_norm

    @property
    def reuses_estimates(self) -> bool:
        """Whether `value_estimates` are what `update` computes for the same unroll before it
        learns (so `update(..., estimates=...)` may take them instead of computing them again):
        true unless it normalises observations or rewards, which `update` moves on first."""
        return not (self.config.normalize_observations or self.config.normalize_rewards)

    def value_estimates(self, state: PPOState, batch: PPOTransition, clock: Clock, carries=None):
        """The values and GAE advantages of an unroll under the state that collected it, learning
        nothing: what a level buffer scores levels by (`ued`)."""
        obs = self.obs_norm(state.obs_norm, batch.obs)
        next_obs = lambda: self.obs_norm(state.obs_norm, batch.next_obs)  # noqa: E731
        value, advantage, _ = self._estimates(
            state.params, state.hp, batch, batch.reward, obs, next_obs, clock, carries, recorded=True
        )
        return value, advantage

    def _targets(self, state: PPOState, batch, reward, obs, next_obs, clock: Clock, estimates, carries=None):
        """The update's advantages and value targets: from `estimates` (the scores' own) where
        they are the same (`reuses_estimates`), else computed."""
        if estimates is not None and self.reuses_estimates:
            value, advantage = estimates
            return advantage, advantage + value
        recorded = not self.config.normalize_observations  # else the update moved the normaliser first
        _, advantage, target = self._estimates(
            state.params, state.hp, batch, reward, obs, next_obs, clock, carries, recorded=recorded
        )
        return advantage, target

    def _estimates(self, params, hp, batch: PPOTransition, reward, obs, next_obs, clock: Clock, carries=None, recorded=False):
        """Values, GAE advantages and value targets of an unroll (`next_obs()`: its successors,
        normalised as `obs`). `recorded`: whether `params` and `obs` are those the unroll was
        collected with, so values the rollout recorded hold (the feed-forward form records none)."""
        value = self._value(params["value"], obs)

        def successors(steps):
            later = next_obs()
            return self._value(params["value"], later if steps is None else later[steps, jnp.arange(later.shape[1])])

        next_value = successor_values(value, batch, clock, successors)
        advantage, target = gae(reward, value, next_value, batch.terminated, batch.truncated, hp.gamma, hp.gae_lambda)
        return value, advantage, target

    def _normalized(self, state: PPOState, batch: PPOTransition):
        """The batch's observations and rewards as the losses read them, and the state with its
        normalisers moved on: the valid-step mask, the normalised observations and successors,
        the rewards (scaled by the running return's spread where the config asks)."""
        mask = batch.valid.astype(jnp.float32)
        state = state.replace(obs_norm=self.obs_norm.update(state.obs_norm, batch.obs, mask))
        reward = batch.reward
        if self.config.normalize_rewards:
            reward, return_acc, return_norm = self._scale_rewards(state, batch, mask)
            state = state.replace(return_acc=return_acc, return_norm=return_norm)
        obs = self.obs_norm(state.obs_norm, batch.obs)
        next_obs = lambda: self.obs_norm(state.obs_norm, batch.next_obs)  # noqa: E731 (where the update needs it)
        return state, mask, reward, obs, next_obs

    @staticmethod
    def _loss_data(obs, batch: PPOTransition, advantage, target, mask, **more) -> dict:
        """What the clipped objective reads of each step."""
        return {
            "obs": obs,
            **more,
            "action": batch.action,
            "log_prob": batch.log_prob,
            "advantage": advantage,
            "target": target,
            "mask": mask,
        }

    def _shuffles(self, key, n: int):
        """Every epoch's permutation of `n` items and its minibatches' loss keys, drawn up front
        (one batched sort and gather rather than one per epoch). The keys are the ones a loop over
        epochs would split, so the minibatches are the same. With one minibatch there is nothing
        to shuffle (every step takes every item; only the order of its sums would change), and
        the order is the rollout's."""

        def shuffle(k):
            k_perm, k_loss = jax.random.split(k)
            order = permutation(k_perm, n) if self.config.num_minibatches > 1 else jnp.arange(n)
            return order, jax.random.split(k_loss, self.config.num_minibatches)

        return jax.vmap(shuffle)(jax.random.split(key, self.config.update_epochs))

    def _minibatch_steps(self, state: PPOState, loss, minibatches, loss_keys, lr, hp: PPOHparams):
        """Every epoch's minibatches as one scan of gradient steps on `loss(params, minibatch,
        key) -> (loss, metrics)`; the new state and the metrics averaged over the steps."""

        def minibatch_step(carry, xs):
            params, opt_state = carry
            minibatch, k = xs
            grads, metrics = jax.grad(loss, has_aux=True)(params, minibatch, k)
            params, opt_state, grad_norm = self.optimizer.step(params, grads, opt_state, lr, hp.max_grad_norm)
            return (params, opt_state), {**metrics, "grad_norm": grad_norm}

        (params, opt_state), metrics = jax.lax.scan(
            minibatch_step, (state.params, state.opt_state), (minibatches, loss_keys.reshape(-1, *loss_keys.shape[2:]))
        )
        metrics = jax.tree.map(jnp.mean, metrics)
        metrics["lr"] = lr
        return state.replace(params=params, opt_state=opt_state), metrics

    def update(self, state: PPOState, batch: PPOTransition, key, clock: Clock, estimates=None):
        """`estimates`: this unroll's `value_estimates`, taken instead of computing them again
        where they are the same (`reuses_estimates`)."""
        cfg, hp = self.config, state.hp
        state, mask, reward, obs, next_obs = self._normalized(state, batch)
        advantage, target = self._targets(state, batch, reward, obs, next_obs, clock, estimates)
        signal = positive_advantage(advantage, mask)

        data = self._loss_data(obs, batch, advantage, target, mask)
        data = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), data)
        lr = clock.rate(hp.lr)
        loss = lambda params, minibatch, k: ppo_loss(params, minibatch, hp, k, self.policy.apply, self._value, self.dist)  # noqa: E731
        perms, loss_keys = self._shuffles(key, data["mask"].shape[0])
        minibatches = jax.tree.map(lambda x: x[perms].reshape(-1, x.shape[0] // cfg.num_minibatches, *x.shape[1:]), data)
        state, metrics = self._minibatch_steps(state, loss, minibatches, loss_keys, lr, hp)
        return state, metrics, signal
