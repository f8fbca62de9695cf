"""The compiled training program, as pure functions (PureJaxRL's `make_train`).

`make_program` closes over everything static (the env, the agent, the loop settings, the number
of lanes) and returns a `Program`: `init(keys, task)` makes a fresh state, one lane after
another, and `call(state)` runs exactly `timesteps_per_iteration` env steps for every lane and
returns the new state with fixed-shape rows. Neither is jitted here: `compiled.Compiled` jits,
donates and counts compilations; `lanes.py` edits a state's lanes on the host.

One call is a scan over updates. The scan runs outside the vmap over lanes, so every lane is at
the same iteration: the evaluation cadence (and an agent's own conditions on the clock) are real
branches, not work done at every update. Each lane has its own traced settings (in the agent's
state) and its own horizon, so members of a population differ only in the values of arrays the
one program reads. The iteration in the state is absolute, so schedules, evaluation cadence and
warm-up continue across calls as if the run were one long call.

An update, for one lane (`learn`), reads top to bottom: restart the envs that finished, collect
an unroll, let the agent learn from it, add the unroll's episodes to the call's per-env
statistics. A decision about which task each env plays next, made every rollout inside the
program (a level buffer's replay or edit), belongs between the restart and the unroll.

The offline program (`offline.py`) is built from the same parts with no env stepped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents.base import Carries, Clock, is_recurrent, reset_carry
from ajax_tune.envs.base import Task
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.fields import ConfigError
from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.rollout import EVAL_ROWS, TRAIN_ROWS, make_collect, make_evaluate
from ajax_tune.loop.state import CallOutput, CallStats, TrainState
from ajax_tune.results import keys as K
from ajax_tune.ued.decider import Decider

#: Folded into a lane's key (never replacing it) for the evaluation before the first update, so
#: the training stream is the same with `eval_at_start` on or off.
START_SALT = 0x5747


@dataclasses.dataclass(frozen=True)
class Program:
    """The pure functions of one training program and the static facts a host needs about it."""

    init: Callable  # (keys [lanes, 2] uint32, task) -> TrainState
    call: Callable  # (state, *inputs) -> (TrainState, CallOutput)
    steps_per_update: int  # per lane: env steps (offline: gradient steps) of one update
    updates_per_call: int
    num_envs: int  # envs per lane: each holds a task
    recurrent: bool = False


def make_program(
    env: EpisodeWrapper,
    agent,
    config: LoopConfig,
    *,
    num_heldout: int = 0,
    num_lanes: int = 1,
    learning_signal: bool = True,
    levels: Decider | None = None,
) -> Program:
    """The online program: envs stepped, the agent learning from each unroll.

    `learning_signal`: whether each call's statistics carry the agent's learning signal. Where
    they do not, nothing reads what the agent computed for it and tracing drops that work (SAC's
    TD errors on the fresh unroll: one actor and two twin-critic passes per update).
    `levels`: a level algorithm (`ued.decider.Decider`) that decides every rollout's levels."""
    if config.reset_mode not in agent.reset_modes:
        raise ConfigError(
            f"train.reset_mode {config.reset_mode!r} does not suit agent {type(agent).__name__}: "
            f"it learns from {list(agent.reset_modes)}"
        )
    venv = VecEnv(env, agent.num_envs)
    recurrent = is_recurrent(agent)
    steps_per_update = agent.num_envs * agent.unroll_length
    budget = config.timesteps_per_iteration
    if budget % steps_per_update:
        lower = budget // steps_per_update * steps_per_update
        raise ConfigError(
            f"train.timesteps_per_iteration ({budget}) must be a whole number of unrolls of "
            f"num_envs * unroll_length = {agent.num_envs} * {agent.unroll_length} = "
            f"{steps_per_update} env steps; nearest: {lower or steps_per_update} or "
            f"{lower + steps_per_update}"
        )
    parts = Parts(env, agent, config, venv, num_heldout, num_lanes, levels)
    collect = make_collect(agent, venv, config.reset_mode, per_step=levels is not None)

    def learn(agent_state, env_state, carry, level_state, key, stats: CallStats, clock: Clock, iteration):
        """One lane's update: restart finished envs (and their carries), or, with a level
        algorithm, start every env on the levels it chooses; collect an unroll; let the agent
        learn from it (or only score it); account for its episodes."""
        k_reset, k_roll, k_update = jax.random.split(key, 3)
        fresh = None
        if levels is None:
            if recurrent:
                fresh = env_state.episode.done  # what reset_done restarts
                carry = reset_carry(agent, carry, fresh)
            env_state = venv.reset_done(env_state, k_reset)
        else:
            k_levels, k_reset = jax.random.split(k_reset)
            level_state, tasks, plan = levels.choose(level_state, k_levels, agent_state, iteration)
            env_state = venv.reset(k_reset, tasks)  # every env on its level; an ended episode replays it
            if recurrent:
                fresh = jnp.ones((venv.num_envs,), jnp.bool_)
                carry = reset_carry(agent, carry, fresh)
        start = carry
        env_state, carry, resets, transitions, episodes = collect(agent_state, env_state, carry, fresh, k_roll)
        carries = {"carries": Carries(start=start, reset=resets)} if recurrent else {}

        def update():
            return agent.update(agent_state, transitions, k_update, clock, **carries)

        if levels is None:
            agent_state, metrics, signal = update()
            health = agent.health(agent_state, metrics)
        else:
            # Only a level buffer scores levels by the agent's values; DR and SFL run with any agent.
            values, advantages = (None, None)
            if levels.config.prioritised:
                values, advantages = agent.value_estimates(agent_state, transitions, **carries)
            # a rollout the agent only scores (robust PLR's fresh levels) reports NaN losses, and
            # its health reads what the agent computed: nothing
            skipped = jax.tree.map(lambda x: jnp.full(x.shape, jnp.nan, x.dtype), jax.eval_shape(update)[1:])
            agent_state, metrics, signal = jax.lax.cond(plan.learn, update, lambda: (agent_state, *skipped))
            health = agent.health(agent_state, jax.tree.map(lambda m: jnp.where(plan.learn, m, 0), metrics))
            level_state = levels.observe(level_state, plan, tasks, values, advantages, episodes)
            metrics = {**metrics, **levels.rows(level_state, plan)}
        stats = stats.replace(
            episodes=stats.episodes + episodes["count"],
            return_sum=stats.return_sum + episodes["return_sum"],
            success_sum=stats.success_sum + episodes["success_sum"],
            steps=stats.steps + episodes["steps"],
        )
        if learning_signal:  # otherwise signal_count stays 0: EnvStats reads NaN
            defined = ~jnp.isnan(signal)
            stats = stats.replace(
                signal_sum=stats.signal_sum + jnp.where(defined, signal, 0.0), signal_count=stats.signal_count + defined
            )
        count = jnp.sum(episodes["count"])
        per_episode = lambda total: jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)  # noqa: E731
        sums = (per_episode(jnp.sum(episodes["return_sum"])), per_episode(jnp.sum(episodes["length_sum"])))
        row = {**dict(zip(TRAIN_ROWS, (*sums, count, jnp.sum(episodes["steps"])))), **metrics}
        health = {k: v.astype(jnp.float32) for k, v in health.items()}
        return agent_state, env_state, carry, level_state, row, health, stats

    def update(carry):
        state, stats = carry
        # Every lane is at the same iteration: the timestep and the evaluation cadence are not
        # batched, so conditions on them are real branches. The horizon is each lane's own.
        iteration = state.iteration[0]
        timestep_now = (iteration * steps_per_update).astype(jnp.float32)
        keys = jax.vmap(lambda k: jax.random.split(k, 4))(state.key)
        agent_state, env_state, carry, level_state, row, health, stats = over_lanes(
            lambda agent_state, env_state, carry, level_state, key, stats, horizon: learn(
                agent_state, env_state, carry, level_state, key, stats, Clock(timestep_now, horizon), iteration
            ),
            num_lanes,
        )(state.agent, state.env, state.carry, state.levels, keys[:, 1], stats, state.horizon)
        row = {**parts.evaluation_rows(state, agent_state, iteration, steps_per_update, lambda: keys[:, 2]), **row}
        new_state = state.replace(
            agent=agent_state,
            env=env_state,
            carry=carry,
            levels=level_state,
            key=keys[:, 0],
            iteration=state.iteration + 1,
            useful_steps=state.useful_steps + row["train/useful_steps"].astype(jnp.int32),
        )
        return (new_state, stats), (row, health)

    return parts.program(update, steps_per_update, recurrent=recurrent)


def over_lanes(f: Callable, num_lanes: int) -> Callable:
    """`f` over the lane axis of its arguments and results: `jax.vmap`, except for one lane,
    where `f` runs on that lane's slice. A vmap turns every `lax.cond` and `lax.switch` whose
    predicate is per lane into a select that computes all branches; run unbatched, a lane's
    branches stay branches (robust PLR's scoring-only rollouts then skip the agent's update, and
    an off-policy agent's warm-up skips its gradient steps), so a single-lane trial does only the
    work its decisions ask for. Lanes of a population all compute every branch, as any SIMD
    program must."""
    if num_lanes > 1:
        return jax.vmap(f)

    def one_lane(*args):
        out = f(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)

    return one_lane


class Parts:
    """What the online and offline programs share: a fresh lane, evaluation and its rows, the
    call's statistics and output. Closes over static settings only."""

    def __init__(
        self, env: EpisodeWrapper, agent, config: LoopConfig, venv: VecEnv, num_heldout: int, num_lanes: int, levels=None
    ):
        self.env, self.agent, self.config, self.venv, self.levels = env, agent, config, venv, levels
        self.num_heldout, self.num_lanes = num_heldout, num_lanes
        self.recurrent = is_recurrent(agent)
        self.evaluate = make_evaluate(agent, env, config.eval_episodes)

    def program(self, update: Callable, steps_per_update: int, recurrent: bool = False) -> Program:
        """The program whose call runs `update((state, stats), *inputs) -> ((state, stats), (row,
        health))` for the call's budget, with the evaluation before the run's first update and
        the call's output around it."""
        updates = self.config.timesteps_per_iteration // steps_per_update

        def call(state: TrainState, *inputs) -> tuple[TrainState, CallOutput]:
            start = self.evaluate_at_start(state)
            stats = jax.vmap(self.empty_stats, axis_size=self.num_lanes)(state.env.task)
            (state, stats), (rows, health) = jax.lax.scan(
                lambda carry, _: update(carry, *inputs), (state, stats), None, length=updates
            )
            return state, self.output(state, stats, rows, health, start)

        return Program(
            init=self.init,
            call=call,
            steps_per_update=steps_per_update,
            updates_per_call=updates,
            num_envs=self.venv.num_envs,
            recurrent=recurrent,
        )

    def init(self, keys: jax.Array, task: Task) -> TrainState:
        """A fresh state of every lane. Lanes are initialised one after another (lax.map), not
        vmapped: XLA's CPU runtime can deadlock in LAPACK's batched QR, which a vmapped
        orthogonal initialiser produces."""
        return jax.lax.map(lambda key: self.init_one(key, task), keys)

    def init_one(self, key: jax.Array, task: Task) -> TrainState:
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
            levels=None if self.levels is None else self.levels.init(task),
        )
        # Weak types (from Python scalars) would not survive a checkpoint, and a restored state
        # would then retrace; make every leaf strongly typed.
        return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), state)

    def evaluation_rows(
        self, state: TrainState, agent_state, iteration, steps_per_update: int, keys: Callable
    ) -> dict[str, jax.Array]:
        """The rows every update writes besides the agent's: its timestep, the evaluation when one
        is due after it (NaN rows otherwise) and the task evaluations run on. `keys()` gives the
        lanes' evaluation keys, drawn inside the branch that evaluates."""
        timestep = (iteration + 1) * steps_per_update
        interval = self.config.eval_interval
        due = timestep // interval > (timestep - steps_per_update) // interval
        evaluation = jax.lax.cond(
            due, lambda: self.evaluate_all(agent_state, state.eval_task, state.heldout, keys()), self.no_evaluation
        )
        return {
            "timestep": jnp.broadcast_to(timestep, state.iteration.shape),
            "eval/timestep": jnp.broadcast_to(jnp.where(due, timestep, -1), state.iteration.shape),
            **evaluation,
            **{f"task/{k}": v.astype(jnp.float32) for k, v in flat_task(state.eval_task).items()},
        }

    def evaluate_at_start(self, state: TrainState) -> dict[str, jax.Array]:
        """The untrained policy's evaluation, in the call that starts the run (the iteration is
        absolute, so a restored run never repeats it); NaN in every other call. Without the
        option the program holds no branch for it at all."""
        if not self.config.eval_at_start:
            return self.no_evaluation()
        keys = jax.vmap(lambda k: jax.random.fold_in(k, START_SALT))(state.key)
        return jax.lax.cond(
            state.iteration[0] == 0,
            lambda: self.evaluate_all(state.agent, state.eval_task, state.heldout, keys),
            self.no_evaluation,
        )

    def evaluate_all(self, agent_state, eval_task, heldout, keys) -> dict[str, jax.Array]:
        out = jax.vmap(self.evaluate)(agent_state, eval_task, keys)
        if self.num_heldout:
            per_task = jax.vmap(jax.vmap(self.evaluate, in_axes=(None, 0, None)))(
                agent_state, heldout, jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
            )
            out.update({f"eval/heldout/{k.split('/')[-1]}": v for k, v in per_task.items()})
        return out

    def no_evaluation(self) -> dict[str, jax.Array]:
        lanes = self.num_lanes
        out = {k: jnp.full((lanes,), jnp.nan, jnp.float32) for k in EVAL_ROWS}
        if self.num_heldout:
            out.update(
                {f"eval/heldout/{k.split('/')[-1]}": jnp.full((lanes, self.num_heldout), jnp.nan, jnp.float32) for k in EVAL_ROWS}
            )
        return out

    def empty_stats(self, task: Task) -> CallStats:
        zeros = jnp.zeros((self.venv.num_envs,), jnp.float32)
        return CallStats(
            episodes=zeros, return_sum=zeros, success_sum=zeros, steps=zeros, signal_sum=zeros, signal_count=zeros, task=task
        )

    def output(self, state: TrainState, stats: CallStats, rows, health, start) -> CallOutput:
        """The call's output, lanes first (the scan wrote updates first)."""
        swap = lambda tree: jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)  # noqa: E731
        if not self.env.has_success:
            stats = stats.replace(success_sum=jnp.full_like(stats.success_sum, jnp.nan))
        return CallOutput(rows=swap(rows), stats=stats.replace(task=state.env.task), health=swap(health), start=start)


def flat_task(task: Task) -> dict[str, jax.Array]:
    """Per lane: scalar fields as they are, array fields one key per element; fields too large
    to report (`K.is_reported_field`) are left out, as `K.task_field_keys` predicts."""
    flat = {}
    for name, value in task.items():
        if not K.is_reported_field(value.shape[1:]):
            continue
        if value.ndim == 1:
            flat[name] = value
        else:
            for i in range(int(np.prod(value.shape[1:]))):
                flat[f"{name}_{i}"] = value.reshape(value.shape[0], -1)[:, i]
    return flat
