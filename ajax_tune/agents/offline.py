"""What every offline agent shares: it learns from a dataset the loop hands it as an argument
(`loop/offline.py`), never from an env of its own.

`learn_offline(state, data, key, clock, steps)` takes `steps` gradient steps on batches drawn
uniformly from `data` (a `ReplayTransition` of the whole dataset, actions in the env's units).
The dataset is the same array for every lane: the loop vmaps this function with the data
unbatched, so lanes index into one copy. Observation statistics are those of the dataset's rows,
computed from `data` in the call (so a new dataset brings its own), and kept in the state for
acting. An agent on this base supplies its config (on `OfflineConfig`), networks, `init` (with
`initial_fields`), `act`, `gradient_step` and `learn_keys`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune.agents.base import AgentBase, Clock, action_scale
from ajax_tune.agents.hparams import Optimizer, all_finite, init_hparams
from ajax_tune.agents.normalization import RunningNormalizer, RunningStats
from ajax_tune.agents.offpolicy import ReplayTransition
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, validate


@dataclasses.dataclass(frozen=True)
class OfflineConfig:
    batch_size: int = static(256, ge=1, doc="dataset rows per gradient step (drawn uniformly, with replacement)")
    normalize_observations: bool = static(True, doc="normalise observations by the dataset's mean and std")

    def __post_init__(self):
        validate(self, "agent")


@struct.dataclass
class OfflineState:
    params: Any
    target_params: Any  # what the bootstrap reads (an agent without one keeps an empty dict)
    opt_state: Any
    obs_norm: RunningStats  # the dataset's statistics, as the last call saw them
    gradient_steps: jax.Array  # int32 since the run began
    hp: Any


class OfflineAgent(AgentBase):
    offline = True
    #: whether the agent learns continuous actions (a Box) or discrete ones: which datasets fit
    continuous = True
    reset_modes = ("next_step", "unroll_start")  # the loop steps no env; evaluation resets its own
    latest_metrics = ("lr",)
    learn_keys: tuple[str, ...] = ()

    def __init__(self, config, observation_space: gymnasium.spaces.Box, action_space):
        self.config = config
        self.num_envs, self.unroll_length = 1, 1  # no training env is stepped: one holds the task
        self.obs_shape = tuple(observation_space.shape)
        self.action_space = action_space
        self.optimizer = Optimizer()
        self.obs_norm = RunningNormalizer(self.obs_shape, config.normalize_observations)
        self.to_env = action_scale(action_space)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        return (*self.learn_keys, "lr")

    def check_run(self, train) -> None:
        if not getattr(train, "dataset", ""):
            raise ConfigError(f"agent.name {self.name!r} learns offline: it needs train.dataset, a dataset directory")

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    def initial_fields(self) -> dict[str, Any]:
        return dict(obs_norm=self.obs_norm.init(), gradient_steps=jnp.zeros((), jnp.int32), hp=init_hparams(self.config))

    def from_env(self, action: jax.Array) -> jax.Array:
        """A dataset's action (env units) as the policy produces it: a Box's in [-1, 1]."""
        if not self.continuous:
            return action.astype(jnp.int32)
        low, high = np.asarray(self.action_space.low, np.float32), np.asarray(self.action_space.high, np.float32)
        return jnp.clip(2.0 * (action - low) / (high - low) - 1.0, -1.0, 1.0)

    def health(self, state, metrics: dict) -> dict[str, jax.Array]:
        return {
            "params": all_finite((state.params, state.target_params)),
            "opt_state": all_finite(state.opt_state),
            "loss": all_finite({k: metrics[k] for k in self.learn_keys}),
        }

    def transition(self, obs, action, extras, next_state):
        raise NotImplementedError(f"{type(self).__name__} learns offline, from train.dataset; it stores no transitions")

    def update(self, state, transitions, key, clock):
        raise NotImplementedError(f"{type(self).__name__} learns offline, from train.dataset (loop.offline)")

    # -- learning ------------------------------------------------------------------------

    def learn_offline(self, state, data: ReplayTransition, key: jax.Array, clock: Clock, steps: int):
        """`steps` gradient steps on uniform batches of `data`; metrics averaged over them.

        Gradient step `i` of the run draws from `fold_in(key, i)`, `key` being the lane's (it
        never advances): the stream is the same however the steps are cut into blocks and calls,
        so a run of calls of any sizes equals one long call."""
        size = data.reward.shape[0]
        state = state.replace(obs_norm=self.obs_norm.update(self.obs_norm.init(), data.obs))
        lr = clock.rate(state.hp.lr)
        normalize = lambda x: self.obs_norm(state.obs_norm, x)  # noqa: E731

        def one(state, _):
            k_rows, k_step = jax.random.split(jax.random.fold_in(key, state.gradient_steps))
            rows = jax.random.randint(k_rows, (self.config.batch_size,), 0, size)
            batch = jax.tree.map(lambda x: jnp.take(x, rows, axis=0), data)
            batch = batch.replace(
                obs=normalize(batch.obs), next_obs=normalize(batch.next_obs), action=self.from_env(batch.action)
            )
            state, metrics = self.gradient_step(state, batch, k_step, lr)
            return state.replace(gradient_steps=state.gradient_steps + 1), metrics

        state, metrics = jax.lax.scan(one, state, None, length=steps)
        return state, {**jax.tree.map(jnp.mean, metrics), "lr": lr}

    def gradient_step(self, state, batch: ReplayTransition, key, lr) -> tuple[Any, dict]:
        """One step on a batch (normalised observations, actions as `from_env` gives them)."""
        raise NotImplementedError
