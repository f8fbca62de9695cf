"""How long a loop's `init` program takes to trace, lower and compile in a fresh process
(project interpreter): the loop's own (`ONCE_COMPILER_OPTIONS`: few XLA passes) or the same
function jitted with JAX's defaults (every pass). Also checks the two give the same state."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402

from ajax_tune.build import build_loop  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs.base import task_to_jax  # noqa: E402

ENVS = {"ppo": "cartpole", "sac": "pendulum", "dqn": "cartpole"}
cfg = Config.from_dict({"env": {"name": ENVS[s["agent"]]}, "agent": {"name": s["agent"]}, "train": {"num_seeds": s["num_seeds"]}})
_, loop = build_loop(cfg)
task = task_to_jax(loop.env.validate_task({}))
keys = jax.random.split(jax.random.PRNGKey(0), cfg.train.num_seeds)
if s["side"] == "once":
    program = loop._init
else:
    program = jax.jit(lambda keys, task: jax.lax.map(lambda key: loop._init_one(key, task), keys))
t0 = time.perf_counter()
lowered = program.lower(keys, task)
t1 = time.perf_counter()
compiled = lowered.compile()
t2 = time.perf_counter()
state = jax.block_until_ready(compiled(keys, task))
t3 = time.perf_counter()
protocol.emit(
    {
        "side": s["side"],
        "agent": s["agent"],
        "lower_s": round(t1 - t0, 4),
        "compile_s": round(t2 - t1, 4),
        "run_s": round(t3 - t2, 4),
        "float_leaf_abs_sum": protocol.float_digest(state),
        "versions": protocol.versions("jax", "jaxlib"),
    }
)
