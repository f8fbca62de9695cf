"""ajax_tune's SAC, TD3 or DQN, timed like the peers (runs in the project's interpreter).

The settings carry the agent's own config keys (`agent_config`), so the worker follows the
agent's config as it is; one call of the whole budget, one evaluation at its end, from a fresh
state each run.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from ajax_tune_offpolicy_loop import offpolicy_loop  # noqa: E402

loop, total = offpolicy_loop(s)


def run(seed):
    state, rows = loop.train(loop.init(seed=seed))
    rows = jax.device_get(rows).rows
    return state, float(np.sum(rows["train/useful_steps"])), float(np.nanmean(rows["eval/return"][:, -1]))


(state, useful, eval_return), first, times = protocol.timed_runs(run, s.get("runs", 2))
assert loop.compilations == 1, loop.compilations
protocol.emit(
    {
        "side": "ajax_tune",
        **protocol.throughput(first, times, float(total * s["num_seeds"]), useful),
        "eval_return": eval_return,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax", "flashbax"),
    }
)
