"""What the training loop asks of an agent, and what it hands over.

The loop is agent-neutral: it steps the envs, evaluates and writes rows. An agent decides what
one env step stores (`transition`), how it learns from a batch of them (`update`), and what it
reports. PPO learns from the fresh unroll directly; SAC and DQN put it into a replay buffer in
their own state and sample from that (`offpolicy.py` holds what they share).

`Agent` is the contract, for an agent of one's own too; `AgentBase` is what the built-in agents
share on top of it (traced settings in `state.hp`, hence one `with_hparams`).

A recurrent agent adds `init_carry` (see `Recurrent`): the loop then keeps one carry per env
beside the env state, hands it to `act` and takes the next one back, starts a fresh carry
exactly where an env starts a new episode, and gives `update` the carries the unroll began
with and where it restarted them, so the update can replay the unroll. An agent without
`init_carry` is called exactly as before and its program holds nothing of this.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium
import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.agents.hparams import lanes_hparams, replace_hparams
from ajax_tune.envs.base import EnvState
from ajax_tune.schedules import ScheduleParams, learning_rate


@struct.dataclass
class Carries:
    """What a recurrent agent's update needs to replay an unroll step by step."""

    start: Any  # the carry each env acted with at the unroll's first step, leading axis [num_envs]
    reset: jax.Array  # [unroll_length, num_envs] bool: the loop started a fresh carry before this step


@struct.dataclass
class Clock:
    """Where an update sits in the run (progress drives every schedule), and how long its
    episodes may last."""

    timestep: jax.Array  # absolute env steps per seed before this update, float32
    horizon: jax.Array  # the run's total_timesteps, float32
    #: the env's time limit in steps (0: unknown): an episode is truncated exactly when it reaches it
    episode_limit: int = struct.field(pytree_node=False, default=0)

    def rate(self, schedule: ScheduleParams) -> jax.Array:
        """A traced learning-rate schedule's value at this update."""
        return learning_rate(schedule, self.timestep, self.horizon)


class Agent(Protocol):
    """An agent owns its parameters and how to improve them; the loop owns everything else.

    Collection shape: every update, the loop steps `num_envs` envs for `unroll_length` steps and
    hands the agent the `[unroll_length, num_envs]` batch of what `transition` returned.
    """

    config: Any
    num_envs: int
    unroll_length: int
    #: the loop's reset modes this agent can learn from ("unroll_start" leaves finished envs
    #: frozen until the next unroll, so its batches hold masked post-done steps).
    reset_modes: tuple[str, ...]
    #: metrics that describe a setting rather than an average (a schedule's value): results
    #: report their value after the call's last update instead of the call's mean.
    latest_metrics: tuple[str, ...]
    #: exactly the keys of the metrics `update` returns, declared on the class so that result
    #: keys (a curriculum's or a scheduler's metric) are checked without building or compiling.
    #: Optional for an agent of one's own; the built-in agents declare it.
    metric_keys: tuple[str, ...]
    #: Whether the learning signal `update` returns costs nothing beyond the update itself (PPO's
    #: mean positive advantage). The loop keeps such a signal whatever the task sampler; any other
    #: (an off-policy agent's TD errors: more network passes) only where a sampler reads it.
    #: Optional; False where absent.
    learning_signal_is_free: bool

    def init(self, key: jax.Array) -> Any:
        """The agent's whole state: parameters, optimiser, normalisers, buffers, traced
        hyperparameters."""

    def act(self, state: Any, obs: jax.Array, key: jax.Array, deterministic: bool = False) -> tuple[jax.Array, dict]:
        """Actions for a batch of observations, in the env's action space, and whatever the
        agent wants to remember about choosing them (log-probabilities, raw samples)."""

    def transition(self, obs: jax.Array, action: jax.Array, extras: dict, next_state: EnvState) -> Any:
        """What one step stores. `next_state` is the state the step produced, before any
        reset: its `obs` is the true successor (the real final observation on a truncation),
        and `episode.post_done` marks a step taken by an env that had already finished."""

    def update(self, state: Any, transitions: Any, key: jax.Array, clock: Clock) -> tuple[Any, dict, jax.Array]:
        """Learn from `[unroll_length, num_envs]` transitions.

        Returns the new state, scalar metrics (the same keys every update), and a per-env
        learning signal `[num_envs]` for task samplers (NaN where the agent has none)."""

    def health(self, state: Any, metrics: dict) -> dict[str, jax.Array]:
        """Named booleans, true while that part is finite (parameters, optimiser state, losses).
        Checked after every update; keep it to the cheap parts (not a replay buffer)."""

    def with_hparams(self, state: Any, config: Any) -> Any:
        """The same state under new traced hyperparameters (static ones must not differ)."""

    # Optional: `check_run(train_config)` raises ConfigError for settings that only make sense
    # against the run (the Runner calls it before building the loop).


class Recurrent(Agent, Protocol):
    """An agent with memory: what it declares on top of `Agent`, and how the loop then calls it."""

    def init_carry(self, num_envs: int) -> Any:
        """A fresh carry for `num_envs` envs (a pytree with that leading axis): what an env's
        first step of an episode is acted on with."""

    def act(
        self, state: Any, obs: jax.Array, key: jax.Array, deterministic: bool = False, *, carry: Any
    ) -> tuple[jax.Array, dict, Any]:
        """As `Agent.act`, with the envs' carries in and the next ones out."""

    def update(
        self, state: Any, transitions: Any, key: jax.Array, clock: Clock, *, carries: Carries
    ) -> tuple[Any, dict, jax.Array]:
        """As `Agent.update`, with what it takes to replay the unroll (`Carries`)."""


def is_recurrent(agent: Any) -> bool:
    """Whether the loop keeps a carry for `agent` (it declares `init_carry`)."""
    return callable(getattr(agent, "init_carry", None))


def reset_carry(agent: Any, carry: Any, fresh: jax.Array) -> Any:
    """`carry` with the envs where `fresh` ([num_envs] bool) holds replaced by new carries."""
    new = agent.init_carry(fresh.shape[0])
    return jax.tree.map(lambda n, c: jnp.where(fresh.reshape(fresh.shape + (1,) * (c.ndim - 1)), n, c), new, carry)


class AgentBase:
    """The built-in agents' common ground: the collection shape read from the config, and the
    traced settings kept in `state.hp` (a struct from `hparams.init_hparams`), so that changing
    them between calls is the same for every agent."""

    metric_keys: tuple[str, ...] = ()
    latest_metrics: tuple[str, ...] = ("lr",)
    learning_signal_is_free: bool = False

    def __init__(self, config: Any):
        self.config = config
        self.num_envs = config.num_envs
        self.unroll_length = config.unroll_length

    @classmethod
    def form(cls, config: Any) -> type:
        """The class that builds an agent of `config`: this one, or one of its forms that a
        setting selects (PPO with `recurrent` set is `RecurrentPPO`)."""
        return cls

    def with_hparams(self, state: Any, config: Any) -> Any:
        return state.replace(hp=replace_hparams(state.hp, config))

    def with_lane_hparams(self, state: Any, configs: list, lanes_each: int) -> Any:
        """A whole state's lanes under `configs` (one per consecutive block of `lanes_each`
        lanes), made on the host: what `with_hparams` gives lane by lane, for an agent whose
        traced settings are `state.hp` alone."""
        return state.replace(hp=lanes_hparams(state.hp, configs, lanes_each))


def action_scale(space: gymnasium.spaces.Space):
    """Map a policy output in [-1, 1] onto a Box action space (identity for discrete spaces)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return lambda a: a
    low, high = space.low, space.high
    return lambda a: low + (a + 1.0) * 0.5 * (high - low)
