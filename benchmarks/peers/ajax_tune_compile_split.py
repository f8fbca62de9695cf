"""ajax_tune's off-policy agent, its first call split by program (project interpreter): the `init`
program lowered, compiled and run, then the training program lowered and compiled for the state
it returns, each timed apart (ahead-of-time `lower` and `compile`, as jit does them on a first
call). The settings are `offpolicy_throughput.py`'s."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
from ajax_tune_offpolicy_loop import offpolicy_loop  # noqa: E402

from ajax_tune.envs.base import task_to_jax  # noqa: E402

loop, _ = offpolicy_loop(s)
keys = jax.random.split(jax.random.PRNGKey(0), loop.num_lanes)
task = task_to_jax(loop.env.validate_task({}))

times = {}
t = time.perf_counter()
lowered = loop._init.lower(keys, task)
times["init_lower_s"] = time.perf_counter() - t
t = time.perf_counter()
init = lowered.compile()
times["init_compile_s"] = time.perf_counter() - t
t = time.perf_counter()
state = jax.device_put(jax.block_until_ready(init(keys, task)), loop.device)
times["init_run_s"] = time.perf_counter() - t
t = time.perf_counter()
lowered = loop._train.lower(state)
times["train_lower_s"] = time.perf_counter() - t
t = time.perf_counter()
compiled = lowered.compile()
times["train_compile_s"] = time.perf_counter() - t
protocol.emit(
    {
        "side": "ajax_tune",
        **{k: round(v, 4) for k, v in times.items()},
        "train_program_s": round(times["train_lower_s"] + times["train_compile_s"], 4),
        "total_s": round(sum(times.values()), 4),
        **protocol.program_counts(compiled.as_text()),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax", "flashbax"),
    }
)
