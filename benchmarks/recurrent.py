"""Recurrent PPO against feed-forward PPO on the same work: env steps per second and compile time.

The work (both sides): PPO on cartpole with its velocities hidden, 32 envs x 64 steps, 4 epochs x
4 minibatches, tanh heads of 64, observations normalised, learning rate decayed linearly from
2.5e-3; the recurrent side adds a GRU of 64 before the heads (`agent.recurrent`), and its
minibatches are whole envs' unrolls. 1 and 8 seeds as lanes of one program. Each run is a fresh
process without the persistent compilation cache (so compile time is real); the sides
alternate; figures are medians over `--repeats` processes, each timing `--calls` training calls
after its first.

    python benchmarks/recurrent.py               # 2 repeats, 1 and 8 seeds
    python benchmarks/recurrent.py --quick       # smoke: 1 repeat, 1 seed, a short budget
    python benchmarks/recurrent.py --sides recurrent --seeds 1 --out before.json   # one side only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import harness

AGENT = {
    "num_envs": 32,
    "unroll_length": 64,
    "num_minibatches": 4,
    "update_epochs": 4,
    "hidden_sizes": [64],
    "lr": 2.5e-3,
    "normalize_observations": True,
}
SIDES = {"feed_forward": {}, "recurrent": {"recurrent": {"cell": "gru", "size": 64}}}
UNROLL = AGENT["num_envs"] * AGENT["unroll_length"]


def worker(settings: dict) -> dict:
    """One side, one process: compile, then time `calls` training calls."""
    import jax

    from ajax_tune.runner import Runner

    config = {
        "env": {"name": "cartpole", "kwargs": {"hide_velocities": True}},
        "agent": {**AGENT, **SIDES[settings["side"]]},
        "train": {
            "total_timesteps": 10_000_000,
            "timesteps_per_iteration": settings["steps_per_call"],
            "num_seeds": settings["num_seeds"],
            "eval_episodes": 8,
        },
    }
    runner = Runner(config)
    loop, state = runner.loop, runner.state
    start = time.perf_counter()
    compiled = loop._train.lower(jax.device_put(state, loop.device)).compile()
    compile_s = time.perf_counter() - start
    state, out = compiled(state)
    jax.block_until_ready(out)
    start = time.perf_counter()
    for _ in range(settings["calls"]):
        state, out = compiled(state)
    jax.block_until_ready(out)
    run_s = time.perf_counter() - start
    steps = settings["calls"] * settings["steps_per_call"] * settings["num_seeds"]
    return {
        "side": settings["side"],
        "num_seeds": settings["num_seeds"],
        "compile_s": round(compile_s, 3),
        "run_s": round(run_s, 3),
        "env_steps_per_s": steps / run_s,
        "device": str(jax.devices()[0]),
    }


def run_worker(settings: dict) -> dict:
    # No persistent compilation cache (the Runner sets none by itself): compile time is measured, not loaded.
    env = {k: v for k, v in harness.worker_env().items() if k not in ("AJAX_TUNE_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(settings)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"worker failed (exit {proc.returncode}):\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        )
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=2, help="processes per side and seed count, alternated")
    parser.add_argument("--calls", type=int, default=2, help="timed training calls per process")
    parser.add_argument("--sides", nargs="+", choices=list(SIDES), default=list(SIDES), help="which sides run (default both)")
    parser.add_argument("--quick", action="store_true", help="smoke: one repeat, 1 seed, short calls")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    steps_per_call = 8 * UNROLL
    if args.quick:
        args.repeats, args.seeds, args.calls, steps_per_call = 1, [1], 2, UNROLL

    results = []
    for seeds in args.seeds:
        runs = {side: [] for side in args.sides}
        for r in range(args.repeats):
            for side in list(runs) if r % 2 == 0 else list(runs)[::-1]:
                out = run_worker({"side": side, "num_seeds": seeds, "steps_per_call": steps_per_call, "calls": args.calls})
                runs[side].append(out)
                print(f"[{seeds} seed(s) {side} {r + 1}/{args.repeats}] {harness.brief(out)}", flush=True)
        summary = {side: harness.medians(r, ("env_steps_per_s", "compile_s", "run_s")) for side, r in runs.items()}
        results.append({"num_seeds": seeds, "summary": summary, "runs": runs})
        if len(runs) == len(SIDES):
            ratio = summary["recurrent"]["env_steps_per_s"]["median"] / summary["feed_forward"]["env_steps_per_s"]["median"]
            results[-1]["recurrent_over_feed_forward"] = ratio
            print(f"[{seeds} seed(s)] recurrent runs at {ratio:.2f}x feed-forward's env steps/s", flush=True)

    work = {"agent": AGENT, "recurrent": SIDES["recurrent"]["recurrent"], "steps_per_call": steps_per_call, "calls": args.calls}
    name = "recurrent_quick" if args.quick else "recurrent"
    harness.write_results(name, {"work": work, "repeats": args.repeats, "results": results}, args.out)


if __name__ == "__main__":
    main()
