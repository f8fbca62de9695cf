"""The offline program: gradient updates on a dataset alone, no env stepped.

Built in the online program's frame (`frame.CallFrame`): the same fresh state, evaluation, rows
and output. `call(state, data)` runs `timesteps_per_iteration` gradient updates per lane, drawn
from the dataset, and evaluates in the env every `eval_every` updates. The dataset is an argument
of the one compiled program on every call, never closed over and never batched: all lanes (seeds
and members) read the one copy in device memory, and a new dataset of the same shape runs in the
same program (`DatasetInput.set_dataset`, or `Runner.reconfigure` with another `train.dataset`:
the program holds the dataset's shape, a run its path and rows).

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
from ajax_tune.datasets import Dataset
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.errors import ConfigError
from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.frame import CallFrame, Program
from ajax_tune.loop.rollout import TRAIN_ROWS

#: Folded into a lane's key for its evaluations (gradient steps fold in their own index).
EVAL_SALT = 0x0E7A


def make_offline_program(
    env: EpisodeWrapper, agent, config: LoopConfig, *, num_heldout: int = 0, num_lanes: int = 1, rescore_heldout: bool = False
) -> Program:
    venv = VecEnv(env, 1)  # holds the task (get_task, set_task); training steps no env
    budget = config.timesteps_per_iteration
    steps_per_update = math.gcd(budget, config.eval_interval)
    frame = CallFrame(env, agent, config, venv, num_heldout, num_lanes, rescore_heldout=rescore_heldout)

    def update(carry, data: ReplayTransition):
        state, stats = carry  # an offline call steps no env: its per-env statistics stay empty
        iteration = state.iteration[0]  # every lane at the same update: the cadence is a real branch
        timestep_now = (iteration * steps_per_update).astype(jnp.float32)
        # The lane's key stays as it is: gradient steps and evaluations fold in their absolute
        # index, so any cut of the run into blocks and calls draws the same numbers.
        eval_keys = jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(k, EVAL_SALT), iteration * steps_per_update))(
            state.key
        )

        def learn(agent_state, key, horizon):
            return agent.learn_offline(agent_state, data, key, Clock(timestep_now, horizon), steps_per_update)

        agent_state, metrics = jax.vmap(learn)(state.agent, state.key, state.horizon)
        health = jax.vmap(agent.health)(agent_state, metrics)
        lanes = state.iteration.shape
        nan, zero = jnp.full(lanes, jnp.nan, jnp.float32), jnp.zeros(lanes, jnp.float32)
        row = {
            **frame.evaluation_rows(state, agent_state, iteration, steps_per_update, lambda: eval_keys),
            **dict(zip(TRAIN_ROWS, (nan, nan, zero, zero))),
            **metrics,
        }
        health = {k: v.astype(jnp.float32) for k, v in health.items()}
        return (state.replace(agent=agent_state, iteration=state.iteration + 1), stats), (row, health)

    return frame.program(update, steps_per_update)


class DatasetInput:
    """The dataset an offline program is called with: kept on the host, copied to the device
    once, described (never stored) in checkpoints."""

    def __init__(self, dataset: Dataset, path: str = ""):
        self._host, self._device = None, None
        self.info: dict = {}
        self.set_dataset(dataset, path)

    def set_dataset(self, dataset: Dataset, path: str = "") -> None:
        """Train on `dataset` from the next call on. One of the same shape and dtypes runs in the
        same compiled program; another shape is refused (it needs a new loop)."""
        host = _rows(dataset)
        if self._host is not None and _shapes(host) != _shapes(self._host):
            raise ConfigError(
                f"a new dataset must have the shape of the loop's ({dataset.size} rows against {self._host.reward.shape[0]}, "
                "or other observation or action shapes): build a new loop for it"
            )
        self._host, self._device = host, None
        self.info = {
            "path": str(pathlib.Path(path).absolute()) if path else "",
            "hash": dataset.content_hash(),
            "rows": dataset.size,
        }

    def fits(self, other: DatasetInput) -> bool:
        """Whether `other` runs in the program built for this dataset: the same rows, shapes and
        dtypes (the program's only static view of a dataset; its path and values are inputs)."""
        return _shapes(other._host) == _shapes(self._host)

    def data(self, device=None) -> ReplayTransition:
        """The dataset on `device` (copied there once, on first use)."""
        if self._device is None:
            self._device = jax.device_put(self._host, device)
        return self._device

    def checkpoint_extra(self) -> dict:
        return {"dataset": self.info}

    def check_restore(self, directory) -> None:
        checkpoint.check_dataset(directory, checkpoint.read_metadata(directory), self.info)


def _rows(dataset: Dataset) -> ReplayTransition:
    """The arrays of `dataset` the offline agents read, as the program takes them."""
    return ReplayTransition(
        obs=dataset.observations,
        action=dataset.actions,
        reward=dataset.rewards,
        terminated=dataset.terminations,
        next_obs=dataset.next_observations,
    )


def _shapes(rows: ReplayTransition) -> list:
    return [(x.shape, x.dtype) for x in jax.tree.leaves(rows)]
