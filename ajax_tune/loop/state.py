"""The data of the compiled program: the state a call takes and gives back, and what else it returns.

`TrainState` is everything the next call reads, for every lane. `CallOutput` and `CallStats`
cross from the jitted call to the host as they are: `results.summary.summarize` reduces a
`CallOutput` to a result's floats, `samplers.stats.EnvStats.from_call` turns its `CallStats` into
what task samplers learn from, and `results.summary.Health` reads its health. No string key is
parsed back on the way.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

from ajax_tune.envs.base import EnvState, Task


@struct.dataclass
class TrainState:
    """Everything the next call reads. Leading axis: lanes (member * num_seeds + seed)."""

    agent: Any
    env: EnvState  # [num_envs] per lane
    key: jax.Array  # raw uint32 key data
    iteration: jax.Array  # int32 updates done since the run began
    useful_steps: jax.Array  # int32 env steps that were not masked, since the run began
    eval_task: Task  # the task evaluations run on
    heldout: Task  # [num_heldout] fixed tasks evaluated beside it
    horizon: jax.Array  # float32 total_timesteps (of the lane's member)
    carry: Any = None  # a recurrent agent's carries, [num_envs] per lane; None for a feed-forward agent
    ued: Any = None  # a level algorithm's state (`ued.LevelState`: its own state, its traced settings); None without one


@struct.dataclass
class CallStats:
    """Per-env sums over one call (`[num_envs]` per seed): what task samplers learn from."""

    episodes: jax.Array  # episodes finished
    return_sum: jax.Array
    success_sum: jax.Array  # NaN where the env reports no success
    steps: jax.Array  # useful (unmasked) steps
    signal_sum: jax.Array  # agent's learning signal, summed over updates where it was defined
    signal_count: jax.Array
    task: Task  # the task each env ran


@struct.dataclass
class CallOutput:
    """What one call returns besides the state, leading axis seeds.

    `rows` hold one value per update (`[seeds, updates]`; `[seeds, updates, num_heldout]` for
    `eval/heldout/*`): `timestep`, the evaluation rows (`eval/timestep` is -1 and the values NaN
    where none ran), the task evaluations ran on (`task/<field>`), the training episodes
    (`train/*`) and the agent's metrics under its own names. `stats` are the per-env sums of the
    call; `health` is, per part of the agent, 1 at each update while that part was finite.
    `start` is the evaluation before the run's first update (`train.eval_at_start`), under the
    evaluation rows' names (`[seeds]`; `[seeds, num_heldout]` for `eval/heldout/*`): NaN in any
    call but the run's first, and in every call without the option."""

    rows: dict[str, jax.Array]
    stats: CallStats
    health: dict[str, jax.Array]
    start: dict[str, jax.Array]
