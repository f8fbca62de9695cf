"""The offline loop shape: training on a dataset alone, no env stepped.

`OfflineLoop` is a `TrainLoop` whose call takes the dataset as an argument besides the state:
`train(state)` runs `timesteps_per_iteration` gradient updates per lane, drawn from the dataset,
and evaluates in the env as the online loop does (every `eval_every` updates; same rows, same
`TrainState`, same checkpoints). The dataset is passed to the one compiled program on every call,
never closed over and never batched: all lanes (seeds and members) read the one copy in device
memory, and a new dataset of the same shape (`set_dataset`) runs in the same program.

The scan runs over blocks of `steps_per_update` gradient steps (the largest block that divides
both the call's budget and the evaluation interval); each block writes one row of the agent's
metrics, averaged over its steps. A checkpoint records the dataset's path and content hash, not
its rows; restoring refuses a dataset whose hash differs from the one the checkpoint recorded.
"""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp

from ajax_tune import checkpoint
from ajax_tune.agents.base import Clock
from ajax_tune.agents.offpolicy import ReplayTransition
from ajax_tune.call_output import CallOutput
from ajax_tune.datasets import Dataset
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.evaluation import make_evaluate
from ajax_tune.fields import ConfigError
from ajax_tune.loop import LoopConfig, TrainLoop, TrainState, _flat_task

__all__ = ["OfflineLoop"]

#: Folded into a lane's key for its evaluations (gradient steps fold in their own index).
EVAL_SALT = 0x0E7A


class OfflineLoop(TrainLoop):
    def __init__(
        self, env, agent, config: LoopConfig, dataset: Dataset, *, path: str = "", num_heldout: int = 0, num_members: int = 1
    ):
        # Not TrainLoop.__init__: its checks are about unrolls of env steps, which this loop has none of.
        self.env = env if isinstance(env, EpisodeWrapper) else EpisodeWrapper(env)
        self.agent, self.config = agent, config
        self.recurrent = False  # the offline agents act feed-forward: no carry in the state
        self.num_heldout = int(num_heldout)
        if int(num_members) < 1:
            raise ConfigError(f"a population needs at least one member, got {num_members}")
        self.num_members = int(num_members)
        self.venv = VecEnv(self.env, 1)  # holds the task (get_task, set_task); training steps no env
        budget = config.timesteps_per_iteration
        self.steps_per_update = math.gcd(budget, config.eval_interval)
        self.updates_per_call = budget // self.steps_per_update
        self._evaluate = make_evaluate(agent, self.env, config.eval_episodes)
        self._jit_programs()
        self._host, self._device_data, self.dataset_info = None, None, {}
        self.set_dataset(dataset, path)

    # -- the dataset ---------------------------------------------------------------------

    def set_dataset(self, dataset: Dataset, path: str = "") -> None:
        """Train on `dataset` from the next call on. One of the same shape and dtypes runs in the
        same compiled program; another shape is refused (it needs a new loop)."""
        host = ReplayTransition(
            obs=dataset.observations,
            action=dataset.actions,
            reward=dataset.rewards,
            terminated=dataset.terminations,
            next_obs=dataset.next_observations,
        )
        if self._host is not None:
            shapes = lambda tree: [(x.shape, x.dtype) for x in jax.tree.leaves(tree)]  # noqa: E731
            if shapes(host) != shapes(self._host):
                raise ConfigError(
                    f"a new dataset must have the shape of the loop's ({dataset.size} rows against {self._host.reward.shape[0]}, "
                    "or other observation or action shapes): build a new loop for it"
                )
        self._host, self._device_data = host, None
        self.dataset_info = {
            "path": str(pathlib.Path(path).absolute()) if path else "",
            "hash": dataset.content_hash(),
            "rows": dataset.size,
        }

    def data(self) -> ReplayTransition:
        """The dataset on the loop's device (copied there once, on first use)."""
        if self._device_data is None:
            self._device_data = jax.device_put(self._host, self.device)
        return self._device_data

    # -- identity and checkpoints --------------------------------------------------------

    def settings(self) -> dict:
        return {**super().settings(), "loop": "offline"}

    def save(self, directory, state: TrainState, extra: dict | None = None):
        extra = {**(extra or {}), "dataset": self.dataset_info}
        return checkpoint.save(directory, state, settings=self.settings(), timestep=self.timestep(state), extra=extra)

    def restore(self, directory):
        checkpoint.check_dataset(directory, checkpoint.read_metadata(directory), self.dataset_info)
        return super().restore(directory)

    def counters(self, state: TrainState, elapsed: float) -> dict[str, float]:
        """The result's progress keys: gradient updates, and no env steps."""
        budget = self.config.timesteps_per_iteration
        return {
            "gradient_steps": self.timestep(state),
            "perf/gradient_steps_per_s": budget * self.num_lanes / elapsed,
            "env_steps": 0,
            "useful_env_steps": 0.0,
            "perf/env_steps_per_s": 0.0,
        }

    # -- training ------------------------------------------------------------------------

    def train(self, state: TrainState) -> tuple[TrainState, CallOutput]:
        """One call: `timesteps_per_iteration` gradient updates per lane. `state` is donated; the
        dataset is an argument, shared by every lane."""
        return self._train(jax.device_put(state, self.device), self.data())

    def _counted_call(self, state: TrainState, data: ReplayTransition):
        self.traces += 1  # runs only while tracing
        return self.call(state, data)

    def call(self, state: TrainState, data: ReplayTransition) -> tuple[TrainState, CallOutput]:
        start = self._evaluate_at_start(state)
        stats = jax.vmap(self._empty_stats)(state.env.task)
        state, (rows, health) = jax.lax.scan(
            lambda s, _: self._offline_update(s, data), state, None, length=self.updates_per_call
        )
        swap = lambda tree: jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)  # noqa: E731 [updates, lanes] -> [lanes, updates]
        if not self.env.has_success:
            stats = stats.replace(success_sum=jnp.full_like(stats.success_sum, jnp.nan))
        return state, CallOutput(rows=swap(rows), stats=stats.replace(task=state.env.task), health=swap(health), start=start)

    def _offline_update(self, state: TrainState, data: ReplayTransition):
        iteration = state.iteration[0]  # every lane at the same update: the cadence is a real branch
        timestep_now = (iteration * self.steps_per_update).astype(jnp.float32)
        # The lane's key stays as it is: gradient steps and evaluations fold in their absolute
        # index, so any cut of the run into blocks and calls draws the same numbers.
        eval_keys = jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(k, EVAL_SALT), iteration * self.steps_per_update))(
            state.key
        )

        def learn(agent_state, key, horizon):
            return self.agent.learn_offline(agent_state, data, key, Clock(timestep_now, horizon), self.steps_per_update)

        agent_state, metrics = jax.vmap(learn)(state.agent, state.key, state.horizon)
        health = jax.vmap(self.agent.health)(agent_state, metrics)

        timestep = (iteration + 1) * self.steps_per_update
        interval = self.config.eval_interval
        due = timestep // interval > (timestep - self.steps_per_update) // interval
        evaluation = jax.lax.cond(
            due, lambda: self._evaluate_all(agent_state, state.eval_task, state.heldout, eval_keys), self._no_evaluation
        )
        lanes = state.iteration.shape
        nan, zero = jnp.full(lanes, jnp.nan, jnp.float32), jnp.zeros(lanes, jnp.float32)
        row = {
            "timestep": jnp.broadcast_to(timestep, lanes),
            "eval/timestep": jnp.broadcast_to(jnp.where(due, timestep, -1), lanes),
            **evaluation,
            **{f"task/{k}": v.astype(jnp.float32) for k, v in _flat_task(state.eval_task).items()},
            "train/episode_return": nan,
            "train/episode_length": nan,
            "train/episodes": zero,
            "train/useful_steps": zero,
            **metrics,
        }
        health = {k: v.astype(jnp.float32) for k, v in health.items()}
        return state.replace(agent=agent_state, iteration=state.iteration + 1), (row, health)


def build_offline_loop(cfg, env: EpisodeWrapper, agent) -> OfflineLoop:
    """The loop of a config with `train.dataset`: the dataset read and checked against the env and
    the agent (one line for whatever does not fit), before anything compiles."""
    from ajax_tune import compat, datasets
    from ajax_tune.agents import AGENTS

    if not getattr(agent, "offline", False):
        offline = sorted(name for name, (cls, _) in AGENTS.items() if getattr(cls, "offline", False))
        raise ConfigError(
            f"train.dataset trains offline, but agent.name {cfg.agent_name!r} learns online; "
            f"use an offline agent ({', '.join(offline)})"
        )
    path = cfg.train.dataset
    if not path.startswith(datasets.MINARI_PREFIX):
        path = pathlib.Path(path).expanduser()
        if not path.is_absolute():  # a Tune trial runs in its own directory: relative to where the run started
            path = pathlib.Path(compat.original_working_dir()) / path
    dataset = datasets.load(path, env, continuous=agent.continuous)
    return OfflineLoop(env, agent, cfg.train, dataset, path=str(path), num_heldout=cfg.num_heldout, num_members=cfg.num_members)
