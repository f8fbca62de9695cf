"""The level-algorithm protocol: what the compiled program asks of an algorithm that decides every
rollout's levels, and what it gives one.

An algorithm is one class. The program builds it once per trial (`LevelAlgorithm(settings,
num_envs, tools)`) and, for every update of every lane, calls

    state, decision = algorithm.choose(state, hp, key, context)   # before the rollout
    ... every env starts on decision.levels; the unroll is collected; the agent learns from it
        only where decision.learn ...
    state = algorithm.observe(state, hp, decision, rollout)        # after it
    rows = algorithm.rows(state, decision)                         # ued/* result rows

`state` is the algorithm's own pytree (a level buffer, say), made by `init(level, key)` with fixed
shapes; `hp` holds its traced settings as arrays, written by the host between calls (PBT changes
them without recompiling) and never by the algorithm. Both live in the trial's training state,
so checkpoints, PBT exploits and population members carry them without the algorithm doing
anything. Every method is pure and traced inside `jit` and `vmap` over lanes: decisions are
arrays, and a branch is `lax.cond` or `lax.switch`, never Python control flow on a value.

`Settings` is the algorithm's section of the trial config, a frozen dataclass whose fields are
declared with `ajax_tune.fields` (`static` fixes the program's shape, `traced` is an array in
`hp`), subclassing `LevelSettings`, so `ued: {algorithm: my_module:MyAlgorithm, ...}` is parsed,
checked and documented like any built-in's. `needs(settings)` says what the program must
provide, checked before anything compiles: the agent's value estimates for every rollout, the
env's success signal, a level generator, a mutator, an evaluation of the sampling policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.fields import static, validate

#: The prefix of every row an algorithm writes.
ROW_PREFIX = "ued/"


@dataclasses.dataclass(frozen=True)
class LevelSettings:
    """What every level algorithm's settings hold: its name and where its levels come from.
    An algorithm's `Settings` subclasses this and adds its own fields."""

    algorithm: str = static(
        "robust_plr", doc="dr | plr | robust_plr | accel | sfl, or 'module:Class' (a LevelAlgorithm of your own)"
    )
    generator: str = static("", doc="'module:function' key -> level (default: the env's generate_level)")
    mutator: str = static("", doc="'module:function' (key, level, num_edits) -> level (default: the env's mutate_level)")

    def __post_init__(self):
        validate(self, "ued")


@dataclasses.dataclass(frozen=True)
class Needs:
    """What an algorithm asks of the program, the agent and the env (checked before compiling)."""

    values: bool = False  # the agent's value estimates and advantages of every rollout (`Rollout.values`)
    success: bool = False  # the env reports success (`info["success"]`)
    generator: bool = True  # a level generator, key -> level
    mutator: bool = False  # a mutator, (key, level, num_edits) -> level
    scoring_episodes: int = 0  # episodes per level of `LevelTools.evaluate` (0: no evaluation)
    #: levels an update scores at once with `LevelTools.evaluate` (a `vmap` over them): with
    #: `scoring_episodes`, the envs the scoring holds, which the memory check counts before compiling
    scored_levels: int = 0


@dataclasses.dataclass(frozen=True)
class LevelTools:
    """The level functions an algorithm works with, all pure JAX on one env's level."""

    generate: Callable | None  # key -> level
    mutate: Callable | None = None  # (key, level, num_edits) -> level
    #: (agent_state, level, key) -> {"eval/return", "eval/length", "eval/success"}: [episodes] each,
    #: the sampling policy's episodes on the level (only where `Needs.scoring_episodes` asked)
    evaluate: Callable | None = None


@dataclasses.dataclass(frozen=True)
class RunShape:
    """The static facts of a run an algorithm may check its settings against."""

    num_envs: int
    unroll_length: int
    max_episode_steps: int
    updates: int  # updates in the run's horizon (`train.total_timesteps`), per lane
    updates_per_call: int
    max_level_edits: int | None = None  # the most edits the env's mutator applies per call, where it says


@struct.dataclass
class Context:
    """What `choose` may read besides its state: the agent (to score candidate levels with) and
    where the run is (the absolute update index, the same for every lane)."""

    agent_state: Any
    iteration: jax.Array


@struct.dataclass
class Decision:
    """One rollout's levels and what follows from them."""

    levels: Any  # each env's level, leading axis [num_envs]
    learn: jax.Array  # bool: whether the agent learns from this rollout (robust PLR: replays only)
    memo: Any = None  # the algorithm's own note for `observe` and `rows` (which slots it replayed, ...)
    #: env steps spent outside training to decide (SFL's scoring episodes), reported apart from `env_steps`
    scoring_steps: jax.Array = struct.field(default_factory=lambda: jnp.zeros((), jnp.int32))


@struct.dataclass
class Rollout:
    """What the rollout on `Decision.levels` showed, per step and env ([T, N])."""

    done: jax.Array  # bool: an episode ended at this step (terminated or truncated)
    reward: jax.Array  # float32: the step's reward
    success: jax.Array  # float32: 1 where an episode ended in success (0 where the env reports none)
    valid: jax.Array  # bool: a real step (not masked after an episode ended)
    values: jax.Array | None = None  # float32: V(s) under the agent before it learned (`Needs.values`)
    advantages: jax.Array | None = None  # float32: GAE advantages, likewise


@struct.dataclass
class LevelState:
    """An algorithm's place in the training state: its own state, its traced settings, and the env
    steps its decisions spent outside training since the run began."""

    own: Any
    hp: Any
    scoring_steps: jax.Array


class LevelAlgorithm:
    """The base of every level algorithm (built-ins and a user's). Subclasses set `Settings`,
    `row_keys` and `latest_keys`, and implement `init`, `choose` and `observe`; `rows`,
    `needs` and `check` have defaults."""

    Settings: ClassVar[type[LevelSettings]] = LevelSettings
    #: the rows `rows` writes, each under `ued/`; results average them over a call...
    row_keys: ClassVar[tuple[str, ...]] = ()
    #: ...except these, read after the call's last update (a buffer's size, its scores)
    latest_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: LevelSettings, num_envs: int, tools: LevelTools):
        self.settings, self.num_envs, self.tools = settings, num_envs, tools

    @classmethod
    def needs(cls, settings: LevelSettings) -> Needs:
        return Needs()

    @classmethod
    def check(cls, settings: LevelSettings, run: RunShape) -> list[str]:
        """Refuse settings that cannot work in this run (raise `ConfigError`, one line), and return
        warnings for those that can but will not do what they say (read before compiling)."""
        return []

    def init(self, level: Any, key: jax.Array) -> Any:
        """The algorithm's fresh state; `level` is one env's level (shapes and dtypes), `key` the
        lane's own (to draw a first set of levels with, say)."""
        raise NotImplementedError

    def choose(self, state: Any, hp: Any, key: jax.Array, context: Context) -> tuple[Any, Decision]:
        raise NotImplementedError

    def observe(self, state: Any, hp: Any, decision: Decision, rollout: Rollout) -> Any:
        return state

    def rows(self, state: Any, decision: Decision) -> dict[str, jax.Array]:
        return {}

    # -- helpers for subclasses ------------------------------------------------------------

    def fresh_levels(self, key: jax.Array, count: int | None = None) -> Any:
        """`count` (default: one per env) levels from the generator."""
        return jax.vmap(self.tools.generate)(jax.random.split(key, count or self.num_envs))
