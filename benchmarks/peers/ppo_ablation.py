"""One variant of ajax_tune's PPO with some of its CPU changes undone (project interpreter):
times the training program's compilation (no persistent cache) and calls of 16 updates of the
throughput benchmark's PPO (its settings come from `ppo_throughput.work`).

Variants name what is undone: `shuffle` (back to `jax.random.permutation`), `dense` (autodiff's
weight gradient), `threefry` (JAX's looped CPU lowering, set by the caller's environment)."""

from __future__ import annotations

import resource
import statistics
import time

import protocol

s = protocol.settings()

import jax  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)

from ajax_tune_ppo_agent import ppo_from  # noqa: E402

from ajax_tune import threefry  # noqa: E402
from ajax_tune.agents import networks  # noqa: E402
from ajax_tune.agents.ppo import agent as ppo_agent  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import LoopConfig, TrainLoop  # noqa: E402

undone = set(s["undo"])
if "shuffle" in undone:
    ppo_agent.permutation = jax.random.permutation
if "dense" in undone:
    networks._kernel_grad_of_rows = networks._kernel_grad

UPDATES = 16
env = make_env("cartpole")
agent = ppo_from(s, env)
batch = s["num_envs"] * s["unroll_length"]
per_call = batch * UPDATES
loop = TrainLoop(
    env,
    agent,
    LoopConfig(
        total_timesteps=per_call * 1000, timesteps_per_iteration=per_call, eval_every=0, eval_episodes=8, num_seeds=s["num_seeds"]
    ),
)
assert threefry._installed == ("threefry" not in undone), "the caller sets the threefry variant's environment"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


state = jax.block_until_ready(loop.init(seed=0))
t0 = time.perf_counter()
compiled = loop._train.lower(state).compile()
compile_s = time.perf_counter() - t0
fusions = compiled.as_text().count(" fusion(")
state, out = loop.train(state)
jax.block_until_ready(out)
walls, cpus = [], []
for _ in range(s["calls"]):
    w, c = time.perf_counter(), cpu()
    state, out = loop.train(state)
    jax.block_until_ready(out)
    walls.append(time.perf_counter() - w)
    cpus.append(cpu() - c)
update_ms = 1000 * statistics.median(walls) / UPDATES
protocol.emit(
    {
        "undo": sorted(undone),
        "num_seeds": s["num_seeds"],
        "compile_s": round(compile_s, 3),
        "fusions": fusions,
        "update_ms": round(update_ms, 3),
        "update_cpu_ms": round(1000 * statistics.median(cpus) / UPDATES, 3),
        "env_steps_per_s": batch * s["num_seeds"] / (update_ms / 1000),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax"),
    }
)
