"""What every off-policy agent shares: a replay buffer in its state, a warm-up, and the checks of
its settings.

Every update stores the fresh unroll (buffer and observation statistics), then, once
`learning_starts` env steps have been stored, takes `utd_ratio * num_envs * unroll_length`
gradient steps on batches drawn from the buffer. The condition reads the loop's clock, which
every seed shares, so under the seed vmap it stays a real branch that skips the gradient steps
outright; until then the losses are NaN, by design, and health does not count them. The buffer
sits in the agent's state, so the loop donates it, checkpoints save it, and a PBT exploit hands it
to the exploiting trial with the parameters.

An agent on this base supplies its config (on `OffPolicyConfig`), its networks, `init` (with
`initial_fields`), `act`, `learn` and `learn_keys` (the names of what `learn` reports), and
`stored_action` where it replays another action than the env's.

Loss terms: an actor objective may carry extra terms (`LossTerm`: TD3+BC's behaviour cloning is
one), each a function of the batch and the policy's actions and values (`ActorTermInputs`) and
of the traced settings, added by `add_terms` and reported as `loss/<name>`. A term is a small
object, not a copy of the agent that uses it, so any actor objective on this base can take one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune.agents.base import AgentBase, Clock
from ajax_tune.agents.hparams import Optimizer, all_finite, init_hparams
from ajax_tune.agents.normalization import RunningNormalizer, RunningStats
from ajax_tune.agents.replay import ReplayBuffer
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, validate


@dataclasses.dataclass(frozen=True)
class OffPolicyConfig:
    """The replay settings every off-policy config has (an agent redeclares a field to change its
    default), their checks and the gradient-step count. A subclass declares
    `normalize_observations`; one with checks of its own calls `super().__post_init__()`."""

    num_envs: int = static(4, ge=1, doc="envs stepped in lock-step per seed")
    unroll_length: int = static(8, ge=1, doc="steps per env between updates")
    utd_ratio: float = static(1.0, gt=0.0, doc="gradient steps per env step (update-to-data ratio)")
    batch_size: int = static(256, ge=1, doc="transitions per gradient step")
    capacity: int = static(100_000, ge=1, doc="replay buffer size per seed, in transitions")
    learning_starts: int = static(
        1_000, ge=0, doc="env steps per seed of uniform random actions, without gradient steps, before learning begins"
    )

    def __post_init__(self):
        validate(self, "agent")
        per_update = self.num_envs * self.unroll_length
        if self.capacity < per_update:
            raise ConfigError(
                f"agent.capacity ({self.capacity}) must hold at least one unroll of num_envs * unroll_length = "
                f"{self.num_envs} * {self.unroll_length} = {per_update} transitions"
            )
        if self.batch_size > self.capacity:
            raise ConfigError(f"agent.batch_size ({self.batch_size}) must not exceed agent.capacity ({self.capacity})")
        steps = self.utd_ratio * per_update
        if abs(steps - round(steps)) > 1e-9 or round(steps) < 1:
            raise ConfigError(
                f"agent.utd_ratio ({self.utd_ratio}) times num_envs * unroll_length ({self.num_envs} * "
                f"{self.unroll_length} = {per_update}) must be a whole number of gradient steps per update "
                f"(>= 1), got {steps:g}"
            )

    @property
    def gradient_steps(self) -> int:
        """Gradient steps after each unroll: the update-to-data ratio, made a static count."""
        return int(round(self.utd_ratio * self.num_envs * self.unroll_length))


@struct.dataclass
class ReplayTransition:
    obs: jax.Array
    action: jax.Array  # as the learner uses it (an index, or a point of [-1, 1])
    reward: jax.Array
    terminated: jax.Array  # cuts the bootstrap; a truncated step keeps it
    next_obs: jax.Array  # the true successor, also the real final observation on a truncation


@struct.dataclass
class OffPolicyState:
    params: Any
    target_params: Any  # the slowly moving copy the bootstrap reads (of what `learn` says)
    opt_state: Any
    buffer: Any  # flashbax item-buffer state: `capacity` transitions
    obs_norm: RunningStats
    timestep: jax.Array  # float32 env steps per seed before the next unroll: acting reads it (warm-up, exploration)
    horizon: jax.Array  # float32 total_timesteps, as the last update saw it
    hp: Any  # traced hyperparameters


@struct.dataclass
class ActorTermInputs:
    """What an actor-loss term may read: the batch (normalised observations, the actions it
    holds, in the policy's units) and the policy's actions there with the critic's values of them."""

    obs: jax.Array  # [batch, *obs]
    data_action: jax.Array  # [batch, action_dim]
    policy_action: jax.Array  # [batch, action_dim], differentiable in the actor's parameters
    q: jax.Array  # [batch]: the (first) critic's value of the policy's action


class LossTerm(Protocol):
    """One term added to an actor objective; traced settings come from `hp`, so Tune may change
    its weight without recompiling."""

    name: str  # reported as loss/<name>

    def __call__(self, inputs: ActorTermInputs, hp: Any) -> jax.Array: ...


def add_terms(base: jax.Array, terms: tuple[LossTerm, ...], inputs: ActorTermInputs, hp: Any) -> tuple[jax.Array, dict]:
    """`base` plus every term's value, and the values by `loss/<name>` (no term: `base` as it is)."""
    values = {f"loss/{term.name}": term(inputs, hp) for term in terms}
    return (base + sum(values.values())) if values else base, values


def check_bounded_box(agent: str, action_space) -> None:
    if not (
        isinstance(action_space, gymnasium.spaces.Box)
        and len(action_space.shape) == 1
        and np.all(np.isfinite(action_space.low))
        and np.all(np.isfinite(action_space.high))
    ):
        raise ConfigError(
            f"agent.name {agent!r} needs a bounded continuous action space (a 1-D Box); this env's action space is {action_space}"
        )


def twin_critic_loss(critic_params, critic_fn, obs, action, target):
    """Both critics regress on one target (`critic_fn` values them together, `[2, batch]`)."""
    q = critic_fn(critic_params, obs, action)
    loss = jnp.sum(jnp.mean((q - target) ** 2, axis=-1))
    return loss, q


class OffPolicyAgent(AgentBase):
    reset_modes = ("next_step",)  # post-done steps never exist, so none can enter the buffer
    latest_metrics = ("lr", "replay/size")
    #: what `learn` reports (averaged over its gradient steps): NaN before learning starts
    learn_keys: tuple[str, ...] = ()

    def __init__(self, config: OffPolicyConfig, observation_space: gymnasium.spaces.Box, action_example: jax.ShapeDtypeStruct):
        """`action_example`: the shape and dtype of one stored action (a shape, not an array, so that
        building an agent, as `Runner.check` does, starts no JAX backend)."""
        super().__init__(config)
        self.steps_per_update = config.num_envs * config.unroll_length
        self.obs_shape = tuple(observation_space.shape)
        self.optimizer = Optimizer()
        self.obs_norm = RunningNormalizer(self.obs_shape, config.normalize_observations)
        obs = jax.ShapeDtypeStruct(self.obs_shape, jnp.float32)
        example = ReplayTransition(
            obs=obs,
            action=action_example,
            reward=jax.ShapeDtypeStruct((), jnp.float32),
            terminated=jax.ShapeDtypeStruct((), jnp.bool_),
            next_obs=obs,
        )
        self.buffer = ReplayBuffer(config.capacity, config.batch_size, example)

    def check_run(self, train) -> None:
        if self.config.learning_starts >= train.total_timesteps:
            raise ConfigError(
                f"agent.learning_starts ({self.config.learning_starts}) must be below train.total_timesteps "
                f"({train.total_timesteps}): the run would be over before the agent learns"
            )

    def initial_fields(self) -> dict[str, Any]:
        """The state's fields every off-policy agent starts alike; `init` adds the networks."""
        return dict(
            buffer=self.buffer.init(),
            obs_norm=self.obs_norm.init(),
            timestep=jnp.zeros((), jnp.float32),
            horizon=jnp.ones((), jnp.float32),  # progress is 0 at timestep 0 whatever the horizon
            hp=init_hparams(self.config),
        )

    def health(self, state: OffPolicyState, metrics: dict) -> dict[str, jax.Array]:
        learning = state.timestep >= self.config.learning_starts  # the losses are NaN until then, by design
        return {
            "params": all_finite((state.params, state.target_params)),
            "opt_state": all_finite(state.opt_state),
            "loss": all_finite({k: metrics[k] for k in self.learn_keys}) | ~learning,
        }

    def transition(self, obs, action, extras, next_state) -> ReplayTransition:
        return ReplayTransition(
            obs=obs,
            action=self.stored_action(action, extras),
            reward=next_state.reward,
            terminated=next_state.terminated,
            next_obs=next_state.obs,
        )

    def stored_action(self, action: jax.Array, extras: dict) -> jax.Array:
        """The action as the learner replays it (the env's by default)."""
        return action

    # -- learning ------------------------------------------------------------------------

    def update(self, state: OffPolicyState, fresh: ReplayTransition, key, clock: Clock):
        state = state.replace(
            buffer=self.buffer.add(state.buffer, fresh),
            obs_norm=self.obs_norm.update(state.obs_norm, fresh.obs),
            timestep=clock.timestep + self.steps_per_update,
            horizon=clock.horizon,
        )
        lr = clock.rate(state.hp.lr)
        learning = clock.timestep + self.steps_per_update >= self.config.learning_starts
        state, metrics, signal = jax.lax.cond(
            learning, lambda: self.learn(state, fresh, key, lr), lambda: self._store_only(state)
        )
        metrics = {
            **metrics,
            **self.setting_metrics(state, clock),
            "lr": lr,
            "replay/size": self.buffer.size(state.buffer).astype(jnp.float32),
        }
        return state, metrics, signal

    def learn(self, state: OffPolicyState, fresh: ReplayTransition, key, lr) -> tuple[OffPolicyState, dict, jax.Array]:
        """Gradient steps on the buffer (`scan_gradient_steps`): the new state, metrics named by
        `learn_keys`, and a per-env learning signal `[num_envs]` from the fresh unroll."""
        raise NotImplementedError

    def setting_metrics(self, state: OffPolicyState, clock: Clock) -> dict[str, jax.Array]:
        """Settings reported every update, learning or not (a temperature, an exploration rate)."""
        return {}

    def scan_gradient_steps(self, step, carry, key):
        """`config.gradient_steps` applications of `step(carry, key) -> (carry, metrics)`, with the
        metrics averaged over them."""
        carry, metrics = jax.lax.scan(step, carry, jax.random.split(key, self.config.gradient_steps))
        return carry, jax.tree.map(jnp.mean, metrics)

    def _store_only(self, state: OffPolicyState):
        nan = jnp.full((), jnp.nan, jnp.float32)
        return state, {k: nan for k in self.learn_keys}, jnp.full((self.num_envs,), jnp.nan, jnp.float32)
