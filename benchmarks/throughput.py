"""PPO throughput on cartpole: compile time and env steps per second for 1 and 8 seeds.

Settings follow the usual JAX-PPO comparison (16 envs, 128-step unrolls, 4 epochs,
4 minibatches, a 64x64 network). Each configuration is built fresh, its first call timed as
compile + run, then `--repeats` calls of `--steps` env steps per seed are timed one by one; the
median is reported. Evaluation is pushed past the measured calls so that only training counts.

    python benchmarks/throughput.py --out benchmarks/results/throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

from ajax_tune.agents import PPO, PPOConfig  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import LoopConfig, TrainLoop  # noqa: E402


def measure(num_seeds: int, steps: int, repeats: int) -> dict:
    env = make_env("cartpole")
    agent = PPO(
        PPOConfig(num_envs=16, unroll_length=128, update_epochs=4, num_minibatches=4, hidden_sizes=(64, 64)),
        env.observation_space, env.action_space,
    )
    horizon = steps * (repeats + 2)
    loop = TrainLoop(env, agent, LoopConfig(
        total_timesteps=horizon, timesteps_per_iteration=steps, eval_every=horizon, num_seeds=num_seeds))
    state = loop.init(seed=0)
    start = time.perf_counter()
    state, rows = loop.train(state)
    jax.block_until_ready(rows)
    first_call = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, rows = loop.train(state)
        jax.block_until_ready(rows)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    assert loop.compilations == 1
    return {
        "num_seeds": num_seeds,
        "steps_per_call_per_seed": steps,
        "first_call_s": round(first_call, 3),
        "compile_s": round(first_call - median, 3),
        "call_s_median": round(median, 4),
        "call_s_all": [round(t, 4) for t in times],
        "env_steps_per_s_per_seed": round(steps / median),
        "env_steps_per_s_total": round(num_seeds * steps / median),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16 * 128 * 24, help="env steps per seed per call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args()
    jax.config.update("jax_enable_compilation_cache", False)  # time real compiles
    results = {
        "benchmark": "ppo_cartpole_throughput",
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "runs": [measure(n, args.steps, args.repeats) for n in args.seeds],
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
