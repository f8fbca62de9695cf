"""What every compiled program has around its updates (`CallFrame`), and what a program is
(`Program`): the online program (`program.py`) and the offline one (`offline.py`) differ only in
the update they scan; a fresh lane, the evaluation before the first update and after each due
update, the call's per-env statistics and its output are the same code for both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents.base import is_recurrent
from ajax_tune.envs.base import Task
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.rollout import EVAL_ROWS, make_evaluate
from ajax_tune.loop.state import CallOutput, CallStats, TrainState
from ajax_tune.loop.summary import RESCORED
from ajax_tune.results import keys as K

#: Folded into a lane's key (never replacing it) for the evaluation before the first update, so
#: the training stream is the same with `eval_at_start` on or off.
START_SALT = 0x5747
#: Folded into a lane's key for its level algorithm's fresh state, so a lane without one draws as before.
LEVEL_SALT = 0x1E7E1


@dataclasses.dataclass(frozen=True)
class Program:
    """The pure functions of one training program and the static facts a host needs about it."""

    init: Callable  # (keys [lanes, 2] uint32, task) -> TrainState
    call: Callable  # (state, *inputs) -> (TrainState, CallOutput)
    steps_per_update: int  # per lane: env steps (offline: gradient steps) of one update
    updates_per_call: int
    num_envs: int  # envs per lane: each holds a task
    recurrent: bool = False


class CallFrame:
    """What every program has around its updates: a fresh lane, the evaluation and its rows, the
    call's statistics and its output. Closes over static settings only."""

    def __init__(
        self,
        env: EpisodeWrapper,
        agent,
        config: LoopConfig,
        venv: VecEnv,
        num_heldout: int,
        num_lanes: int,
        level_update=None,
        rescore_heldout: bool = False,
    ):
        """`rescore_heldout`: play the held-out set a second time on independent keys (its CVaR is
        chosen on the first set of episodes and scored on the second)."""
        self.env, self.agent, self.config, self.venv, self.level_update = env, agent, config, venv, level_update
        self.num_heldout, self.num_lanes = num_heldout, num_lanes
        self.rescore_heldout = rescore_heldout and num_heldout > 0
        self.recurrent = is_recurrent(agent)
        self.evaluate = make_evaluate(agent, env, config.eval_episodes, deterministic=config.eval_policy == "deterministic")

    def program(self, update: Callable, steps_per_update: int) -> Program:
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
            recurrent=self.recurrent,
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
            ued=None if self.level_update is None else self.level_update.init(task, jax.random.fold_in(k_loop, LEVEL_SALT)),
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
        """Each lane's evaluation on its task and, with a held-out set, on every held-out task
        (twice with `rescore_heldout`, on other keys): one evaluation over all of them, so the
        program holds one copy of the env's step for every evaluation, not one for each kind.
        Each task keeps the key it would have alone (the held-out tasks share one, the rescoring
        another), and an env that is done stays as it ended while the others run on, so the
        figures are those of separate evaluations."""
        if not self.num_heldout:
            return jax.vmap(self.evaluate)(agent_state, eval_task, keys)
        count, sets = self.num_heldout, 2 if self.rescore_heldout else 1

        def one_lane(agent, task, held, key):
            tasks = {k: jnp.concatenate([v[None], *[held[k].astype(v.dtype)] * sets]) for k, v in task.items()}
            shared = [jnp.broadcast_to(jax.random.fold_in(key, salt), (count, *key.shape)) for salt in range(1, sets + 1)]
            return jax.vmap(self.evaluate, in_axes=(None, 0, 0))(agent, tasks, jnp.concatenate([key[None], *shared]))

        both = jax.vmap(one_lane)(agent_state, eval_task, heldout, keys)
        out = {k: v[:, 0] for k, v in both.items()}
        out.update({f"eval/heldout/{k.split('/')[-1]}": v[:, 1 : 1 + count] for k, v in both.items()})
        if self.rescore_heldout:
            again = {k: both[k][:, 1 + count :] for k in ("eval/return", "eval/success")}
            out.update({RESCORED[f"eval/heldout/{k.split('/')[-1]}"]: v for k, v in again.items()})
        return out

    def no_evaluation(self) -> dict[str, jax.Array]:
        lanes = self.num_lanes
        out = {k: jnp.full((lanes,), jnp.nan, jnp.float32) for k in EVAL_ROWS}
        if self.num_heldout:
            out.update(
                {f"eval/heldout/{k.split('/')[-1]}": jnp.full((lanes, self.num_heldout), jnp.nan, jnp.float32) for k in EVAL_ROWS}
            )
        if self.rescore_heldout:
            out.update({k: jnp.full((lanes, self.num_heldout), jnp.nan, jnp.float32) for k in RESCORED.values()})
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
