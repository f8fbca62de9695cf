"""Throughput and compile time of one population trial against its number of members: PPO on
cartpole, K = 1, 4, 16 and 64 members x 2 seeds, through `Runner` (no Ray, no Tune).

The members differ in the learning rate's peak only (a log-spaced range), so all K x 2 lanes are
one compiled program. Each K runs in a fresh process with the persistent compilation cache off
(every compile is cold); it reports the seconds of building the runner (the init program's
compile), of the first call (the train program's compile, then the call), of each later call,
and env steps per second over the later calls, all lanes together. `perf/compilations` must stay
1 whatever K. The trial settings are those of `configs/population_search_cartpole.yaml`.

    python benchmarks/population_scale.py                    # K = 1 4 16 64, 3 timed calls, 2 rounds
    python benchmarks/population_scale.py --quick            # K = 1 4 16, 1 timed call, once
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import harness
import yaml

HERE = pathlib.Path(__file__).resolve().parent
CONFIG = HERE / "configs" / "population_search_cartpole.yaml"
SEEDS = 2


def trial_config(members: int, calls: int) -> dict:
    """The search's trial with `members` learning rates as one population (2 seeds each)."""
    trial = yaml.safe_load(CONFIG.read_text())["trial"]
    low, high = 5.0e-4, 5.6e-3
    peaks = [low * (high / low) ** (k / max(members - 1, 1)) for k in range(members)]
    trial["agent"]["lr"]["peak"] = peaks[0]
    trial["train"]["num_seeds"] = SEEDS
    trial["train"]["total_timesteps"] = trial["train"]["timesteps_per_iteration"] * (calls + 1)
    trial.pop("resources", None)
    if members > 1:
        trial["population"] = {"members": [{"agent": {"lr": {"peak": p}}} for p in peaks]}
    return trial


def worker(settings: dict) -> dict:
    """One K in this (fresh) process: build, first call, timed calls."""
    start = time.perf_counter()
    from ajax_tune.runner import Runner

    imported = time.perf_counter()
    runner = Runner(settings["config"])
    built = time.perf_counter()
    first = runner.train()
    first_done = time.perf_counter()
    rates, calls = [], []
    result = first
    for _ in range(settings["calls"]):
        result = runner.train()
        calls.append(result["perf/call_s"])
        rates.append(result["perf/env_steps_per_s"])
    members = int(result.get("population/size", 1))
    returns = [result[f"member/{k}/eval/return_mean"] for k in range(members)] if members > 1 else [result["eval/return_mean"]]
    return {
        "members": members,
        "lanes": runner.loop.num_lanes,
        "import_s": round(imported - start, 3),
        "build_s": round(built - imported, 3),  # the loop, the initial state: the init program's compile
        "first_call_s": round(first_done - built, 3),  # the train program's compile and one call
        "call_s": [round(c, 4) for c in calls],
        "env_steps_per_s": statistics.median(rates),
        "env_steps_per_call": settings["config"]["train"]["timesteps_per_iteration"] * runner.loop.num_lanes,
        "compilations": result["perf/compilations"],
        "eval_returns": returns,
        "device": str(runner.loop.device),
    }


def run_one(members: int, calls: int) -> dict:
    env = harness.worker_env()
    env.update({"JAX_ENABLE_COMPILATION_CACHE": "false", "JAX_PLATFORMS": env.get("JAX_PLATFORMS", "cpu")})
    settings = {"config": trial_config(members, calls), "calls": calls}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(settings)], capture_output=True, text=True, env=env, timeout=3600
    )
    if proc.returncode != 0:
        raise RuntimeError(f"K={members} failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--calls", type=int, default=3, help="timed calls after the first (which compiles)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, the order of K alternated")
    parser.add_argument("--quick", action="store_true", help="K = 1 4 16, one timed call, once")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.quick:
        args.members, args.calls, args.repeats = [m for m in args.members if m <= 16], 1, 1

    runs = []
    for r in range(args.repeats):
        for members in args.members if r % 2 == 0 else args.members[::-1]:
            out = run_one(members, args.calls)
            runs.append(out)
            print(
                f"[K={members} x {SEEDS} seeds, {r + 1}/{args.repeats}] {out['env_steps_per_s']:,.0f} env steps/s, "
                f"build {out['build_s']:.1f} s, first call {out['first_call_s']:.1f} s, compilations {out['compilations']}",
                flush=True,
            )
    summary = []
    for members in args.members:
        mine = [o for o in runs if o["members"] == members]
        med = harness.medians(mine, ("env_steps_per_s", "build_s", "first_call_s", "import_s"))
        summary.append({"members": members, "lanes": mine[0]["lanes"], "compilations": [o["compilations"] for o in mine], **med})
    path = harness.write_results(
        "population_scale" + ("_quick" if args.quick else ""),
        {
            "config": harness._relative(str(CONFIG)),
            "seeds_per_member": SEEDS,
            "timed_calls": args.calls,
            "load_average_at_end": os.getloadavg(),
            "summary": summary,
            "runs": runs,
        },
        args.out,
    )
    lines = [
        "| members x seeds | lanes | env steps/s (all lanes) | per lane | build s (init compile) | first call s (compile) |",
        "|---|---|---|---|---|---|",
    ]
    for s in summary:
        rate = s["env_steps_per_s"]["median"]
        lines.append(
            f"| {s['members']} x {SEEDS} | {s['lanes']} | {rate:,.0f} | {rate / s['lanes']:,.0f} | "
            f"{s['build_s']['median']:.1f} | {s['first_call_s']['median']:.1f} |"
        )
    print("\n".join(lines))
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
