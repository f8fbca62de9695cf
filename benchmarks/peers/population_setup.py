"""How long a fresh process takes to put each member's traced settings on its lanes
(`TrainLoop.set_hparams` with one config per member), as shipped or by the earlier way: every
leaf of the agent's state sliced per member, the settings applied, every leaf joined again.
Also checks that the two give the same state."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.build import build_loop  # noqa: E402
from ajax_tune.config import Config  # noqa: E402

members = [{"agent": {"lr": {"kind": "linear", "peak": 5e-4 * 1.4**k}}} for k in range(s["members"])]
trial = {"env": {"name": s["env"]}, "agent": {"name": s["agent"]}, "train": {"num_seeds": s["num_seeds"]}}
cfg = Config.from_dict({**trial, "population": {"members": members}})
_, loop = build_loop(cfg)
state = jax.block_until_ready(loop.init())
configs = [m.agent for m in cfg.members]


def slice_and_join(agent_state):
    per_member = [
        jax.vmap(loop.agent.with_hparams, in_axes=(0, None))(jax.tree.map(lambda x, m=m: x[loop.member_lanes(m)], agent_state), c)
        for m, c in enumerate(configs)
    ]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *per_member)


t0 = time.perf_counter()
if s["side"] == "shipped":
    agent = jax.block_until_ready(loop.set_hparams(state, configs).agent)
else:
    agent = jax.block_until_ready(slice_and_join(state.agent))
first = time.perf_counter() - t0
t0 = time.perf_counter()
jax.block_until_ready(loop.set_hparams(state, configs) if s["side"] == "shipped" else slice_and_join(state.agent))
again = time.perf_counter() - t0
leaves = [np.asarray(x) for x in jax.tree.leaves(agent)]
digest = float(sum(np.sum(np.abs(x.astype(np.float64))) for x in leaves if np.issubdtype(x.dtype, np.floating)))
protocol.emit(
    {
        "side": s["side"],
        "agent": s["agent"],
        "first_s": round(first, 4),
        "again_s": round(again, 4),
        "float_leaf_abs_sum": digest,
        "versions": protocol.versions("jax", "jaxlib", "ajax-tune"),
    }
)
