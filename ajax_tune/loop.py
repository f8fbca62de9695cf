"""The resumable, jitted, agent-neutral training loop.

`TrainLoop` is built once per configuration. Its `train` function is compiled once, takes the
state donated, runs exactly `timesteps_per_iteration` env steps for each of its lanes (`num_members` members x
`num_seeds` seeds, members-major) and returns the new state with fixed-shape rows. The iteration counter in the state is absolute,
so schedules, evaluation cadence and warm-up continue across calls as if the run were one long
call: N calls of T steps give the same parameters as one call of N*T steps.

The loop steps the envs, hands the agent what its `transition` asks for, calls its `update`,
evaluates and writes rows. It knows nothing of any agent's keys. The scan over updates runs
outside the vmap over lanes: every lane is at the same iteration, so the evaluation cadence (and
an agent's own conditions on the clock) stay real branches instead of running every update.
Each lane has its own traced settings (in the agent's state) and its own horizon, so members of a
population differ only in the values of arrays the one program reads.
A recurrent agent's carry (one per env) lives beside the env state: a fresh one starts exactly
where an env starts an episode, and the carries an unroll began with reach the agent's update.
A feed-forward agent's state has no carry (None), so its program is what it was without this.
Nothing here knows about Ray.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune import checkpoint, compat
from ajax_tune.agents.base import AgentBase, Carries, Clock, is_recurrent, reset_carry
from ajax_tune.call_output import CallOutput, CallStats
from ajax_tune.envs.base import EnvState, Task, task_to_jax
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.evaluation import EVAL_ROWS, make_evaluate, summarize
from ajax_tune.fields import ConfigError, init_only, static, static_values, traced, validate

__all__ = ["CallOutput", "CallStats", "LoopConfig", "TrainLoop", "TrainState"]

ON_NONFINITE = ("stop", "error", "continue")
RESET_MODES = ("next_step", "unroll_start")
LEARNING_SIGNAL = ("auto", "always")
#: Folded into a seed's key (never replacing it) for the evaluation before the first update, so
#: the training stream is the same with `eval_at_start` on or off.
START_SALT = 0x5747
#: How a program that runs once per state compiles (a fresh state from `init`): with few of XLA's
#: passes (as `JAX_DISABLE_MOST_OPTIMIZATIONS` builds) and without its CPU fusion emitters. It runs
#: in milliseconds either way, while every pass made it the slowest compile before a trial's first
#: result after the training program's (`benchmarks/init_compile.py` measures both).
ONCE_COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    total_timesteps: int = traced(1_000_000, ge=1, doc="the run's horizon: schedules span it")
    timesteps_per_iteration: int = static(
        49_152, ge=1, doc="env steps per seed in one train() call (the default: whole unrolls of every built-in agent's defaults)"
    )
    eval_every: int = static(0, ge=0, doc="env steps between evaluations; 0: once per call")
    eval_episodes: int = static(10, ge=1, doc="episodes of the deterministic policy per evaluation, per seed")
    eval_at_start: bool = static(
        False,
        doc="evaluate the untrained policy once, before the run's first update: "
        "eval/start/* in the first result (NaN in later ones)",
    )
    num_seeds: int = static(1, ge=1, doc="independent seeds trained side by side")
    reset_mode: str = static(
        "next_step",
        choices=RESET_MODES,
        doc="when a finished env starts its next episode: on the very next step, or frozen (masked) until the next unroll starts",
    )
    learning_signal: str = static(
        "auto",
        choices=LEARNING_SIGNAL,
        doc="the agent's learning signal in each call's statistics (what PLR ranks levels by): auto "
        "computes it where the task sampler reads it (an off-policy agent's TD errors cost network "
        "passes; PPO's is free and always kept), always whatever the sampler, so that changing "
        "between samplers keeps one program",
    )
    dataset: str = static(
        "",
        doc="a dataset directory (docs/offline.md): train on it alone with an offline agent; "
        "timesteps then count gradient updates, not env steps",
    )
    seed: int = init_only(0, ge=0, doc="the random seed of the run; its seeds are splits of it")
    on_nonfinite: str = init_only(
        "stop",
        choices=ON_NONFINITE,
        doc="when parameters, optimiser state or metrics stop being finite: stop the trial (its result "
        "says where), raise an error, or continue (a PBT exploit may replace the state); scores "
        "read as the worst in every case",
    )

    def __post_init__(self):
        validate(self, "train")

    @property
    def eval_interval(self) -> int:
        return self.eval_every or self.timesteps_per_iteration


@struct.dataclass
class TrainState:
    """Everything the next call reads. Leading axis: lanes (member * num_seeds + seed)."""

    agent: Any
    env: EnvState  # [num_envs] per seed
    key: jax.Array  # raw uint32 key data
    iteration: jax.Array  # int32 updates done since the run began
    useful_steps: jax.Array  # int32 env steps that were not masked, since the run began
    eval_task: Task  # the task evaluations run on
    heldout: Task  # [num_heldout] fixed tasks evaluated beside it
    horizon: jax.Array  # float32 total_timesteps (of the lane's member)
    carry: Any = None  # a recurrent agent's carries, [num_envs] per seed; None for a feed-forward agent


class TrainLoop:
    def __init__(self, env, agent, config: LoopConfig, num_heldout: int = 0, num_members: int = 1, learning_signal: bool = True):
        self.env = env if isinstance(env, EpisodeWrapper) else EpisodeWrapper(env)
        self.agent = agent
        self.config = config
        # Whether each call's statistics carry the agent's learning signal (`Config.learning_signal`
        # decides it for a run). Where they do not, nothing reads what the agent computed for it
        # and tracing drops that work (SAC's TD errors on the fresh unroll: one actor and two
        # twin-critic passes per update).
        self.learning_signal = bool(learning_signal)
        self.num_heldout = int(num_heldout)
        if int(num_members) < 1:
            raise ConfigError(f"a population needs at least one member, got {num_members}")
        self.num_members = int(num_members)
        if config.reset_mode not in agent.reset_modes:
            raise ConfigError(
                f"train.reset_mode {config.reset_mode!r} does not suit agent {type(agent).__name__}: "
                f"it learns from {list(agent.reset_modes)}"
            )
        self.venv = VecEnv(self.env, agent.num_envs)
        self.recurrent = is_recurrent(agent)
        self.steps_per_update = agent.num_envs * agent.unroll_length
        budget = config.timesteps_per_iteration
        if budget % self.steps_per_update:
            lower = budget // self.steps_per_update * self.steps_per_update
            raise ConfigError(
                f"train.timesteps_per_iteration ({budget}) must be a whole number of unrolls of "
                f"num_envs * unroll_length = {agent.num_envs} * {agent.unroll_length} = "
                f"{self.steps_per_update} env steps; nearest: {lower or self.steps_per_update} or "
                f"{lower + self.steps_per_update}"
            )
        self.updates_per_call = budget // self.steps_per_update
        self._evaluate = make_evaluate(agent, self.env, config.eval_episodes)
        self._jit_programs()

    def _jit_programs(self) -> None:
        """The loop's two programs (traced and compiled on first use): `init`, built with few
        passes since it runs once per state, and `train`, which donates the state it is given."""
        self.traces = 0
        # Seeds are initialised one after another (lax.map), not vmapped: XLA's CPU runtime can
        # deadlock in LAPACK's batched QR, which a vmapped orthogonal initialiser produces.
        self._init = compat.jit_with_options(
            lambda keys, task: jax.lax.map(lambda key: self._init_one(key, task), keys), ONCE_COMPILER_OPTIONS
        )
        self._train = jax.jit(self._counted_call, donate_argnums=0)

    # -- identity ------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The static settings that give a saved state its meaning (not how a run proceeds:
        budgets and evaluation settings may change between a save and a restore)."""
        env = self.env
        return {
            "env": env.name,
            "observation_space": repr(env.observation_space),
            "action_space": repr(env.action_space),
            "max_episode_steps": env.max_episode_steps,
            "truncation_penalty": env.truncation_penalty,
            "task_fields": sorted(env.task_spec),
            "agent": type(self.agent).__name__,
            **{f"agent.{k}": v for k, v in static_values(self.agent.config).items()},
            "num_seeds": self.config.num_seeds,
            "num_heldout": self.num_heldout,
            **({"num_members": self.num_members} if self.num_members > 1 else {}),
        }

    @property
    def num_lanes(self) -> int:
        """Lanes of the state's leading axis: members x seeds."""
        return self.num_members * self.config.num_seeds

    def member_lanes(self, member: int) -> slice:
        """The lanes of one member (its seeds)."""
        seeds = self.config.num_seeds
        return slice(member * seeds, (member + 1) * seeds)

    @property
    def compilations(self) -> int:
        """Programs compiled for `train` so far: 1 unless something forced a recompilation.

        Counted from jit's own cache, which also sees recompilations without a retrace (an
        argument with another placement), and never fewer than the traces."""
        return max(self.traces, compat.jit_cache_size(self._train))

    @property
    def device(self):
        """Where states live: JAX's default device. Looked up on first use, not when the loop is
        built, so that validating a config never starts JAX's backends (a driver that has
        started them warns at every fork Ray makes)."""
        return jax.devices()[0]

    def timestep(self, state: TrainState) -> int:
        return int(np.asarray(state.iteration).reshape(-1)[0]) * self.steps_per_update

    def useful_steps(self, state: TrainState) -> float:
        """Unmasked env steps per lane since the run began (the mean over lanes)."""
        return float(np.mean(np.asarray(state.useful_steps, np.float64)))

    def summarize(self, out: CallOutput) -> dict[str, float]:
        return summarize(out, latest=self.agent.latest_metrics)

    # -- state ---------------------------------------------------------------------------

    def init(self, seed: int | Sequence[int] | None = None, task: Mapping | None = None) -> TrainState:
        """A fresh state. `seed` (one for every member, or one per member) gives each member the
        seeds a single run with that seed would have, so equal members train equal lanes."""
        seed = self.config.seed if seed is None else seed
        seeds = list(seed) if isinstance(seed, Sequence) else [seed] * self.num_members
        if len(seeds) != self.num_members:
            raise ConfigError(f"init takes one seed or one per member ({self.num_members}), got {len(seeds)}")
        task = self.env.validate_task(task or {})
        keys = jnp.concatenate([jax.random.split(jax.random.PRNGKey(s), self.config.num_seeds) for s in seeds])
        return self._init(keys, task_to_jax(task))

    def _init_one(self, key, task) -> TrainState:
        k_agent, k_env, k_loop = jax.random.split(key, 3)
        heldout = {k: jnp.broadcast_to(v, (self.num_heldout, *v.shape)) for k, v in task.items()} if self.num_heldout else {}
        state = TrainState(
            agent=self.agent.init(k_agent),
            env=self.venv.reset(k_env, task),
            key=k_loop,
            iteration=jnp.zeros((), jnp.int32),
            useful_steps=jnp.zeros((), jnp.int32),
            eval_task=task,
            heldout=heldout,
            horizon=jnp.asarray(self.config.total_timesteps, jnp.float32),
            carry=self.agent.init_carry(self.venv.num_envs) if self.recurrent else None,
        )
        # Weak types (from Python scalars) would not survive a checkpoint, and a restored state
        # would then retrace; make every leaf strongly typed.
        return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), state)

    def set_task(
        self, state: TrainState, task: Mapping, eval_task: Mapping | None = None, lanes: slice | None = None
    ) -> TrainState:
        """Apply a task (one for all envs, or one per env) to every seed, or only to `lanes`
        (one member's); validated first.

        Evaluations follow `eval_task`, by default the task itself or, for a per-env batch, the
        task of env 0. Envs whose task changed start a new episode at the next unroll.
        """
        current = self.get_task(state, per_env=True, lanes=lanes)
        new = self.env.validate_task(task, num_envs=self.venv.num_envs, current=current)
        if eval_task is not None:
            eval_new = self.env.validate_task(eval_task)
        else:
            eval_new = {k: (v[0] if v.ndim > len(self.env.task_spec[k].shape) else v) for k, v in new.items()}
        set_one = jax.vmap(self.venv.set_task, in_axes=(0, None))
        if lanes is None:
            count = self.num_lanes
            return state.replace(
                env=set_one(state.env, task_to_jax(new)),
                eval_task={k: jnp.broadcast_to(jnp.asarray(v), (count, *v.shape)) for k, v in eval_new.items()},
            )
        count = len(range(*lanes.indices(self.num_lanes)))
        part = set_one(jax.tree.map(lambda x: x[lanes], state.env), task_to_jax(new))
        return state.replace(
            env=jax.tree.map(lambda whole, x: whole.at[lanes].set(x), state.env, part),
            eval_task={
                k: state.eval_task[k].at[lanes].set(jnp.broadcast_to(jnp.asarray(v), (count, *v.shape)))
                for k, v in eval_new.items()
            },
        )

    def set_heldout(self, state: TrainState, tasks: Mapping) -> TrainState:
        """The fixed tasks evaluated beside the current one: each field with a leading axis of
        `num_heldout` (validated like any per-env task batch)."""
        if not self.num_heldout:
            raise ConfigError("this loop was built without held-out tasks (num_heldout=0)")
        batch = self.env.validate_task(tasks, num_envs=self.num_heldout)
        for name, value in batch.items():
            if value.shape[:1] != (self.num_heldout,):
                batch[name] = np.broadcast_to(value, (self.num_heldout, *value.shape))
        lanes = self.num_lanes
        return state.replace(heldout={k: jnp.broadcast_to(jnp.asarray(v), (lanes, *v.shape)) for k, v in batch.items()})

    def get_task(self, state: TrainState, per_env: bool = False, lanes: slice | None = None) -> dict[str, np.ndarray]:
        """The evaluation task (or each env's task) of lane 0, or of the first of `lanes`, as
        numpy arrays (the lanes of a member run the same tasks)."""
        source = state.env.task if per_env else state.eval_task
        lane = 0 if lanes is None else lanes.start
        return {k: np.asarray(v[lane]) for k, v in source.items()}

    def set_hparams(self, state: TrainState, agent_config=None, total_timesteps: int | Sequence[int] | None = None) -> TrainState:
        """New traced hyperparameters for the rest of the run, without recompiling: one agent
        config (and horizon) for every lane, or a sequence of one per member."""
        if agent_config is not None:
            configs = list(agent_config) if isinstance(agent_config, Sequence) else [agent_config]
            for config in configs:
                if static_values(config) != static_values(self.agent.config):
                    raise ConfigError("set_hparams changes only traced fields; static fields differ: rebuild the loop")
            if self._hparams_on_host and len(configs) in (1, self.num_members):
                lanes_each = self.num_lanes // len(configs)
                agent = self.agent.with_lane_hparams(state.agent, configs, lanes_each)
            elif len(configs) == 1:
                agent = jax.vmap(self.agent.with_hparams, in_axes=(0, None))(state.agent, configs[0])
            elif len(configs) == self.num_members:
                agent = self._per_member_hparams(state.agent, configs)
            else:
                raise ConfigError(
                    f"set_hparams takes one agent config or one per member ({self.num_members}), got {len(configs)}"
                )
            state = state.replace(agent=agent)
        if total_timesteps is not None:
            horizons = list(total_timesteps) if isinstance(total_timesteps, Sequence) else [total_timesteps] * self.num_members
            if len(horizons) != self.num_members:
                raise ConfigError(f"set_hparams takes one horizon or one per member ({self.num_members}), got {len(horizons)}")
            per_lane = np.repeat(np.asarray(horizons, np.float32), self.config.num_seeds)
            state = state.replace(horizon=jnp.asarray(per_lane, state.horizon.dtype))
        return state

    @property
    def _hparams_on_host(self) -> bool:
        """Whether the agent's traced settings are its state's `hp` alone (the built-in agents'
        `with_hparams`), so that each lane's values can be made on the host."""
        cls = type(self.agent)
        return getattr(cls, "with_hparams", None) is AgentBase.with_hparams and hasattr(cls, "with_lane_hparams")

    def _per_member_hparams(self, agent_state, configs: list):
        """Each member's config on its own lanes. Every config is applied to all lanes, which
        returns each leaf it leaves alone as the very array it was given; only the leaves some
        config changed (the traced settings) are assembled, member by member, from their lanes.
        Slicing and joining every leaf instead (parameters, optimiser state, replay buffer) was
        3.5-5x slower in a fresh process (`benchmarks/population_setup.py`)."""
        versions = [jax.vmap(self.agent.with_hparams, in_axes=(0, None))(agent_state, c) for c in configs]
        lanes = [self.member_lanes(m) for m in range(len(configs))]

        def join(old, *new):
            if all(n is old for n in new):
                return old
            return jnp.concatenate([n[lane] for n, lane in zip(new, lanes, strict=True)])

        return jax.tree.map(join, agent_state, *versions)

    def reseed(self, state: TrainState, salt: int) -> TrainState:
        """The same state with every seed's random stream re-keyed by `salt`."""
        return state.replace(key=jax.vmap(lambda k: jax.random.fold_in(k, salt))(state.key))

    def save(self, directory, state: TrainState, extra: dict | None = None):
        """Write a checkpoint of `state` (complete on return); `extra` is JSON metadata."""
        return checkpoint.save(directory, state, settings=self.settings(), timestep=self.timestep(state), extra=extra)

    def restore(self, directory) -> tuple[TrainState, dict]:
        """A state saved by `save` with the same settings, and its metadata."""
        return checkpoint.restore(directory, self.abstract_state(), settings=self.settings())

    def abstract_state(self) -> TrainState:
        """The state's shapes and dtypes (`jax.ShapeDtypeStruct` leaves), traced from `init`
        without compiling, allocating or starting JAX's backends: what a checkpoint must fit, and what `call`
        can be traced with to learn the shapes of a call's output."""
        keys = jax.ShapeDtypeStruct((self.num_lanes, 2), jnp.uint32)
        task = {
            k: jax.ShapeDtypeStruct(v.shape, jax.dtypes.canonicalize_dtype(v.dtype))
            for k, v in self.env.validate_task({}).items()
        }
        return jax.eval_shape(self._init, keys, task)

    # -- training ------------------------------------------------------------------------

    def train(self, state: TrainState) -> tuple[TrainState, CallOutput]:
        """One call: `timesteps_per_iteration` env steps per seed. `state` is donated.

        Returns the new state and the call's output: per-update rows, per-env statistics and
        the agent's health (`CallOutput`).

        Every state is committed to the loop's device first (free when it already is), so a
        state fresh from `init`, restored from a checkpoint or edited on the host all match
        the one compiled program."""
        return self._train(jax.device_put(state, self.device))

    def _counted_call(self, state: TrainState):
        self.traces += 1  # runs only while tracing
        return self.call(state)

    def call(self, state: TrainState) -> tuple[TrainState, CallOutput]:
        """The pure function `train` compiles (not jitted, not donated): trace it with
        `jax.eval_shape(loop.call, loop.abstract_state())` to learn a call's output."""
        start = self._evaluate_at_start(state)
        stats = jax.vmap(self._empty_stats)(state.env.task)
        (state, stats), (rows, health) = jax.lax.scan(self._update, (state, stats), None, length=self.updates_per_call)
        swap = lambda tree: jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)  # noqa: E731 [updates, seeds] -> [seeds, updates]
        if not self.env.has_success:
            stats = stats.replace(success_sum=jnp.full_like(stats.success_sum, jnp.nan))
        return state, CallOutput(rows=swap(rows), stats=stats.replace(task=state.env.task), health=swap(health), start=start)

    def _evaluate_at_start(self, state: TrainState) -> dict[str, jax.Array]:
        """The untrained policy's evaluation, in the call that starts the run (the iteration is
        absolute, so a restored run never repeats it); NaN in every other call. Without the
        option the program holds no branch for it at all."""
        if not self.config.eval_at_start:
            return self._no_evaluation()
        keys = jax.vmap(lambda k: jax.random.fold_in(k, START_SALT))(state.key)
        return jax.lax.cond(
            state.iteration[0] == 0,
            lambda: self._evaluate_all(state.agent, state.eval_task, state.heldout, keys),
            self._no_evaluation,
        )

    def _empty_stats(self, task: Task) -> CallStats:
        zeros = jnp.zeros((self.venv.num_envs,), jnp.float32)
        return CallStats(
            episodes=zeros, return_sum=zeros, success_sum=zeros, steps=zeros, signal_sum=zeros, signal_count=zeros, task=task
        )

    def _update(self, carry, _):
        state, stats = carry
        # Every lane is at the same iteration: the timestep and the evaluation cadence are not
        # batched, so conditions on them are real branches. The horizon is each lane's own.
        iteration = state.iteration[0]
        timestep_now = (iteration * self.steps_per_update).astype(jnp.float32)
        keys = jax.vmap(lambda k: jax.random.split(k, 4))(state.key)
        agent_state, env_state, carry, row, health, stats = jax.vmap(
            lambda agent, env, carry, key, stats, horizon: self._learn(
                agent, env, carry, key, stats, Clock(timestep_now, horizon)
            )
        )(state.agent, state.env, state.carry, keys[:, 1], stats, state.horizon)

        timestep = (iteration + 1) * self.steps_per_update
        interval = self.config.eval_interval
        due = timestep // interval > (timestep - self.steps_per_update) // interval
        evaluation = jax.lax.cond(
            due, lambda: self._evaluate_all(agent_state, state.eval_task, state.heldout, keys[:, 2]), self._no_evaluation
        )
        row = {
            "timestep": jnp.broadcast_to(timestep, state.iteration.shape),
            "eval/timestep": jnp.broadcast_to(jnp.where(due, timestep, -1), state.iteration.shape),
            **evaluation,
            **{f"task/{k}": v.astype(jnp.float32) for k, v in _flat_task(state.eval_task).items()},
            **row,
        }
        new_state = state.replace(
            agent=agent_state,
            env=env_state,
            carry=carry,
            key=keys[:, 0],
            iteration=state.iteration + 1,
            useful_steps=state.useful_steps + row["train/useful_steps"].astype(jnp.int32),
        )
        return (new_state, stats), (row, health)

    def _learn(self, agent_state, env_state: EnvState, carry, key, stats: CallStats, clock: Clock):
        """One seed: restart finished envs (and their carries), collect an unroll, let the agent
        learn from it."""
        k_reset, k_roll, k_update = jax.random.split(key, 3)
        if self.recurrent:
            fresh = env_state.episode.done  # what reset_done restarts
            carry = reset_carry(self.agent, carry, fresh)
        env_state = self.venv.reset_done(env_state, k_reset)
        if self.recurrent:
            start = carry
            env_state, carry, resets, transitions, episodes = self._collect_recurrent(
                agent_state, env_state, carry, fresh, k_roll
            )
            carries = Carries(start=start, reset=resets)
            agent_state, metrics, signal = self.agent.update(agent_state, transitions, k_update, clock, carries=carries)
        else:
            env_state, transitions, episodes = self._collect(agent_state, env_state, k_roll)
            agent_state, metrics, signal = self.agent.update(agent_state, transitions, k_update, clock)
        health = self.agent.health(agent_state, metrics)
        stats = stats.replace(
            episodes=stats.episodes + episodes["count"],
            return_sum=stats.return_sum + episodes["return_sum"],
            success_sum=stats.success_sum + episodes["success_sum"],
            steps=stats.steps + episodes["steps"],
        )
        if self.learning_signal:  # otherwise signal_count stays 0: EnvStats reads NaN
            defined = ~jnp.isnan(signal)
            stats = stats.replace(
                signal_sum=stats.signal_sum + jnp.where(defined, signal, 0.0), signal_count=stats.signal_count + defined
            )
        count = jnp.sum(episodes["count"])
        per_episode = lambda total: jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)  # noqa: E731
        row = {
            "train/episode_return": per_episode(jnp.sum(episodes["return_sum"])),
            "train/episode_length": per_episode(jnp.sum(episodes["length_sum"])),
            "train/episodes": count,
            "train/useful_steps": jnp.sum(episodes["steps"]),
            **metrics,
        }
        health = {k: v.astype(jnp.float32) for k, v in health.items()}
        return agent_state, env_state, carry, row, health, stats

    def _collect(self, agent_state, env_state: EnvState, key):
        """`unroll_length` lock-step steps of every env; per-env episode sums of the unroll."""
        next_step = self.config.reset_mode == "next_step"

        def step(env_state, keys):
            k_act, k_env, k_reset = keys
            action, extras = self.agent.act(agent_state, env_state.obs, k_act)
            nxt = self.venv.step_each(env_state, action, k_env)
            out = self._step_out(env_state, action, extras, nxt)
            if next_step:  # the next episode starts now; the transition kept the real final obs
                nxt = self.venv.reset_done_each(nxt, k_reset)
            return nxt, out

        env_state, outs = jax.lax.scan(step, env_state, self._unroll_keys(key))
        transitions, episodes = self._episode_sums(*outs)
        return env_state, transitions, episodes

    def _collect_recurrent(self, agent_state, env_state: EnvState, carry, fresh, key):
        """`_collect` for an agent with a carry: each env's carry goes into `act` and the next
        one comes out; where the env starts a new episode mid-unroll, so does its carry. Also
        returns, per step, whether the carry acted on was fresh (`fresh` for the first step)."""
        next_step = self.config.reset_mode == "next_step"

        def step(loop_carry, keys):
            env_state, carry, fresh = loop_carry
            k_act, k_env, k_reset = keys
            action, extras, carry = self.agent.act(agent_state, env_state.obs, k_act, carry=carry)
            nxt = self.venv.step_each(env_state, action, k_env)
            out = (fresh, self._step_out(env_state, action, extras, nxt))
            restarted = jnp.zeros_like(fresh)
            if next_step:
                restarted = nxt.episode.done
                carry = reset_carry(self.agent, carry, restarted)
                nxt = self.venv.reset_done_each(nxt, k_reset)
            return (nxt, carry, restarted), out

        (env_state, carry, _), (resets, outs) = jax.lax.scan(step, (env_state, carry, fresh), self._unroll_keys(key))
        transitions, episodes = self._episode_sums(*outs)
        return env_state, carry, resets, transitions, episodes

    def _step_out(self, env_state: EnvState, action, extras, nxt: EnvState):
        """What one step of an unroll keeps: the agent's transition and episode bookkeeping."""
        transition = self.agent.transition(env_state.obs, action, extras, nxt)
        ended = (nxt.terminated | nxt.truncated).astype(jnp.float32)
        success = nxt.info["success"].astype(jnp.float32) if self.env.has_success else jnp.zeros_like(ended)
        return (
            transition,
            ended,
            nxt.episode.ret,
            nxt.episode.step.astype(jnp.float32),
            success,
            (~nxt.episode.post_done).astype(jnp.float32),
        )

    def _unroll_keys(self, key):
        # Every step's keys in three batched draws: splitting inside the step would cost the
        # rollout a few small sequential programs per step.
        length, num_envs = self.agent.unroll_length, self.venv.num_envs
        k_act, k_env, k_reset = jax.random.split(key, 3)
        return (
            jax.random.split(k_act, length),
            jax.random.split(k_env, (length, num_envs)),
            jax.random.split(k_reset, (length, num_envs)),
        )

    @staticmethod
    def _episode_sums(transitions, ended, ret, length, success, valid):
        episodes = {
            "count": jnp.sum(ended, axis=0),
            "return_sum": jnp.sum(ret * ended, axis=0),
            "length_sum": jnp.sum(length * ended, axis=0),
            "success_sum": jnp.sum(success * ended, axis=0),
            "steps": jnp.sum(valid, axis=0),
        }
        return transitions, episodes

    def _evaluate_all(self, agent_state, eval_task, heldout, keys) -> dict[str, jax.Array]:
        out = jax.vmap(self._evaluate)(agent_state, eval_task, keys)
        if self.num_heldout:
            per_task = jax.vmap(jax.vmap(self._evaluate, in_axes=(None, 0, None)))(
                agent_state, heldout, jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
            )
            out.update({f"eval/heldout/{k.split('/')[-1]}": v for k, v in per_task.items()})
        return out

    def _no_evaluation(self) -> dict[str, jax.Array]:
        seeds = self.num_lanes
        out = {k: jnp.full((seeds,), jnp.nan, jnp.float32) for k in EVAL_ROWS}
        if self.num_heldout:
            out.update(
                {f"eval/heldout/{k.split('/')[-1]}": jnp.full((seeds, self.num_heldout), jnp.nan, jnp.float32) for k in EVAL_ROWS}
            )
        return out


def _flat_task(task: Task) -> dict[str, jax.Array]:
    """Per seed: scalar fields as they are, array fields one key per element."""
    flat = {}
    for name, value in task.items():
        if value.ndim == 1:
            flat[name] = value
        else:
            for i in range(int(np.prod(value.shape[1:]))):
                flat[f"{name}_{i}"] = value.reshape(value.shape[0], -1)[:, i]
    return flat
