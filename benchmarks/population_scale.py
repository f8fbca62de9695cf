"""Throughput and compile time of one population trial against its number of members: PPO on
cartpole, K = 1, 4, 16 and 64 members x 2 seeds, through `Runner` (no Ray, no Tune).

The members differ in the learning rate's peak only (a log-spaced range), so all K x 2 lanes are
one compiled program. Each K runs in a fresh process with the persistent compilation cache off
(every compile is cold); it reports the seconds of building the runner (the init program's
compile), of the first call (the train program's compile, then the call), of each later call,
and env steps per second over the later calls, all lanes together. `perf/compilations` must stay
1 whatever K. The trial settings are those of `configs/population_search_cartpole.yaml`.

`--task acrobot | breakout | pendulum` runs the search of `benchmarks/tuning_outcome.py` instead
(`configs/outcome_<task>.yaml`): its trial, and K configs drawn from its search space (seed 0)
as the members. `--sequential K ...` adds, for those K, the same K configs trained one after
another in one process (`peers/ajax_tune_sequential.py`: one `Runner`, reconfigured onto each
config, one compilation), each config for as many calls as a member trains (the first and the
timed ones): the population's whole process against the sequential one's, from start to exit,
so that what a config costs beside its env steps (a process, imports, compiling) is paid once by
both and the difference is what lanes of one program gain over one config at a time.

    python benchmarks/population_scale.py                    # K = 1 4 16 64, 3 timed calls, 2 rounds
    python benchmarks/population_scale.py --quick            # K = 1 4 16, 1 timed call, once
    python benchmarks/population_scale.py --task acrobot --members 1 64 256 --sequential 64 256 --calls 1
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
#: --task: the searches of benchmarks/tuning_outcome.py (their trial and search space).
TASKS = ("cartpole", "acrobot", "breakout", "pendulum")


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


def task_configs(task: str, members: int, calls: int) -> tuple[dict, list[dict]]:
    """An outcome task's trial with `members` configs drawn from its search space (seed 0) as
    one population, and the same configs as trial configs of their own."""
    import numpy as np

    from ajax_tune.population.draws import draw
    from ajax_tune.population.spec import merge
    from ajax_tune.spaces import parse_spaces, sample

    trial = yaml.safe_load((HERE / "configs" / f"outcome_{task}.yaml").read_text())["trial"]
    trial.pop("resources", None)
    space = parse_spaces(trial)
    base = sample(space)
    train = base["train"]
    train["total_timesteps"] = train["timesteps_per_iteration"] * (calls + 1)
    rng = np.random.default_rng(0)
    overrides = [draw(space, rng) for _ in range(members)]
    # a member's override holds the searched settings only (draw leaves the rest as written)
    searched = [_only_domains(space, o) for o in overrides]
    singles = [merge(base, o) for o in searched]
    population = {**base, "population": {"members": searched}} if members > 1 else singles[0]
    return population, singles


def _only_domains(space, drawn):
    """The parts of `drawn` that `space` has a domain at."""
    from ajax_tune.spaces import Domain

    if isinstance(space, Domain):
        return drawn
    if isinstance(space, dict):
        out = {k: _only_domains(v, drawn[k]) for k, v in space.items()}
        out = {k: v for k, v in out.items() if v is not _NONE}
        return out or _NONE
    return _NONE


_NONE = object()


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


def cold_env() -> dict:
    env = harness.worker_env()
    env.update({"JAX_ENABLE_COMPILATION_CACHE": "false", "JAX_PLATFORMS": env.get("JAX_PLATFORMS", "cpu")})
    return env


def configs(task: str, members: int, calls: int) -> tuple[dict, list[dict]]:
    """The population trial of `members` configs, and the same configs as trials of their own."""
    if task != "cartpole":
        return task_configs(task, members, calls)
    population = trial_config(members, calls)
    single = {k: v for k, v in population.items() if k != "population"}
    overrides = population["population"]["members"] if members > 1 else [{}]
    from ajax_tune.population.spec import merge

    return population, [merge(single, o) for o in overrides]


def run_one(members: int, calls: int, task: str = "cartpole") -> dict:
    settings = {"config": configs(task, members, calls)[0], "calls": calls}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(settings)], capture_output=True, text=True, env=cold_env(), timeout=3600
    )
    if proc.returncode != 0:
        raise RuntimeError(f"K={members} failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def run_sequential(members: int, calls: int, task: str = "cartpole") -> dict:
    """The same configs one after another in one process, each for the calls a member trains."""
    singles = configs(task, members, calls)[1]
    settings = {"configs": singles, "iterations": calls + 1, "cpus": os.cpu_count()}
    out = harness.run_worker(sys.executable, "ajax_tune_sequential.py", settings, timeout=4 * 3600, extra_env=cold_env())
    steps = sum(c["train"]["timesteps_per_iteration"] * c["train"].get("num_seeds", 1) * (calls + 1) for c in singles)
    return {
        "members": members,
        "process_wall_s": out["process_wall_s"],
        "env_steps": steps,
        "env_steps_per_s_whole_process": steps / out["process_wall_s"],
        "compilations": out["compilations"],
        "per_config_s": [t["wall_s"] for t in out["trials"]],
        "eval_returns": [t["eval_return"] for t in out["trials"]],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, default="cartpole", help="the search (default: cartpole's learning rates)")
    parser.add_argument("--members", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--sequential", type=int, nargs="*", default=[], help="K whose configs also run one by one")
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
        args.sequential = [m for m in args.sequential if m <= 16]
    unknown = sorted(set(args.sequential) - set(args.members))
    if unknown:
        raise SystemExit(f"--sequential {unknown}: not among --members")

    runs, sequential = [], []
    for r in range(args.repeats):
        for members in args.members if r % 2 == 0 else args.members[::-1]:
            ways = ["population", "sequential"] if members in args.sequential else ["population"]
            for way in ways if r % 2 == 0 else ways[::-1]:  # the two ways alternate too
                if way == "sequential":
                    out = run_sequential(members, args.calls, args.task)
                    sequential.append(out)
                    print(
                        f"[K={members} one by one, {r + 1}/{args.repeats}] {out['process_wall_s']:.1f} s from start to exit, "
                        f"{out['env_steps_per_s_whole_process']:,.0f} env steps/s over it, compilations {out['compilations']}",
                        flush=True,
                    )
                    continue
                out = run_one(members, args.calls, args.task)
                runs.append(out)
                seeds = out["lanes"] // out["members"]
                print(
                    f"[K={members} x {seeds} seeds, {r + 1}/{args.repeats}] {out['env_steps_per_s']:,.0f} env steps/s, "
                    f"build {out['build_s']:.1f} s, first call {out['first_call_s']:.1f} s, "
                    f"process {out['process_wall_s']:.1f} s, compilations {out['compilations']}",
                    flush=True,
                )
    summary = []
    for members in args.members:
        mine = [o for o in runs if o["members"] == members]
        med = harness.medians(mine, ("env_steps_per_s", "build_s", "first_call_s", "import_s", "process_wall_s"))
        entry = {"members": members, "lanes": mine[0]["lanes"], "compilations": [o["compilations"] for o in mine], **med}
        one_by_one = [o for o in sequential if o["members"] == members]
        if one_by_one:
            entry["sequential"] = harness.medians(one_by_one, ("process_wall_s", "env_steps_per_s_whole_process"))
            entry["sequential_over_population_wall"] = round(
                entry["sequential"]["process_wall_s"]["median"] / entry["process_wall_s"]["median"], 2
            )
        summary.append(entry)
    name = "population_scale" + ("" if args.task == "cartpole" else f"_{args.task}") + ("_quick" if args.quick else "")
    config = CONFIG if args.task == "cartpole" else HERE / "configs" / f"outcome_{args.task}.yaml"
    path = harness.write_results(
        name,
        {
            "task": args.task,
            "config": harness._relative(str(config)),
            "seeds_per_member": mine[0]["lanes"] // mine[0]["members"],
            "timed_calls": args.calls,
            "summary": summary,
        },
        args.out,
        raw={"runs": runs, "sequential_runs": sequential},
    )
    lines = [
        "| members x seeds | lanes | env steps/s (all lanes) | per lane | build s (init compile) | first call s (compile) "
        "| process s | one by one, process s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        rate = s["env_steps_per_s"]["median"]
        seeds = s["lanes"] // s["members"]
        alone = s.get("sequential")
        alone = f"{alone['process_wall_s']['median']:.1f} ({s['sequential_over_population_wall']:.2f}x)" if alone else ""
        lines.append(
            f"| {s['members']} x {seeds} | {s['lanes']} | {rate:,.0f} | {rate / s['lanes']:,.0f} | "
            f"{s['build_s']['median']:.1f} | {s['first_call_s']['median']:.1f} | {s['process_wall_s']['median']:.1f} | {alone} |"
        )
    print("\n".join(lines))
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
