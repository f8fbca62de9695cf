"""How long a fresh process takes to put each member's traced settings on its lanes
(`TrainLoop.set_hparams` with one config per member), as shipped (each lane's settings made on
the host) or by an earlier way: `all_lanes`, each member's settings applied to all lanes on the
device and the changed leaves joined from their lanes; `slice_and_join`, every leaf of the
agent's state sliced per member, the settings applied, every leaf joined again. Also checks that
they give the same state."""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

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


def all_lanes(agent_state):
    versions = [jax.vmap(loop.agent.with_hparams, in_axes=(0, None))(agent_state, c) for c in configs]
    lanes = [loop.member_lanes(m) for m in range(len(configs))]

    def join(old, *new):
        return old if all(n is old for n in new) else jnp.concatenate([n[lane] for n, lane in zip(new, lanes)])

    return jax.tree.map(join, agent_state, *versions)


def shipped(agent_state):
    return loop.set_hparams(state.replace(agent=agent_state), configs).agent


apply = {"shipped": shipped, "all_lanes": all_lanes, "slice_and_join": slice_and_join}[s["side"]]
agent, first, _ = protocol.time_call(lambda: jax.block_until_ready(apply(state.agent)))
_, again, _ = protocol.time_call(lambda: jax.block_until_ready(apply(state.agent)))
protocol.emit(
    {
        "side": s["side"],
        "agent": s["agent"],
        "first_s": round(first, 4),
        "again_s": round(again, 4),
        "float_leaf_abs_sum": protocol.float_digest(agent),
        "versions": protocol.versions("jax", "jaxlib", "ajax-tune"),
    }
)
