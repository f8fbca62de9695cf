"""One population trial against separate Tune trials on the same GPU: PPO on cartpole, the time
until a config's evaluation return reaches 500, and env steps per second.

Each way is one `ajax-tune run` of `configs/gpu_population_cartpole.yaml` (learning-rate peaks
and entropy coefficients drawn by one seeded random search, 4 seeds per config, calls of 8,192
env steps per seed) from a fresh process with an empty compilation cache of its own (cold):

- `population`: 256 configs as the members of one trial (256 x 4 = 1,024 lanes of one
  program), holding the whole GPU;
- `trials`: 8 configs as 8 Tune trials of 4 seeds each, an eighth of the GPU each (JAX gets
  the matching memory fraction), all running at once;
- `trials_population` (not in the default set): 256 configs as 8 trials of 32 members, an eighth
  of the GPU each.

Every trial runs 40 calls, so that each way's throughput is measured past its compile. Measured
per way: `solve_s`, from the command's start (Ray's start, imports and compiles included) to
the end of the first call after which some trial's headline evaluation return (a population's:
its best member's) was at the threshold (from the trace of every process,
`trace/sitecustomize.py`);
`env_steps_per_s`, every lane's env steps in the calls after each trial's first, over the time
from the first of those calls to the end of the last (each trial's median `perf/env_steps_per_s`
is recorded too);
the env steps all lanes had trained at that first solve; `perf/compilations` of every trial; and
the platform each trial's JAX ran on.

    python benchmarks/gpu_population.py             # on a GPU machine: the two default ways, alternated
    python benchmarks/gpu_population.py --quick     # the same path on the CPU: 8 configs, 2 seeds, small
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile
import time

import harness
from time_to_solve import ajax_tune_command, alarms, traced_env

HERE = pathlib.Path(__file__).resolve().parent
CONFIG = HERE / "configs" / "gpu_population_cartpole.yaml"
METRIC = "eval/return_mean"

# How each way packs the configs: (Tune trials, members per trial).
FULL = {"population": (1, 256), "trials": (8, 1), "trials_population": (8, 32)}
# The CPU smoke: the same three shapes, small (8 configs; 2 trials; 2 trials of 4).
QUICK = {"population": (1, 8), "trials": (2, 1), "trials_population": (2, 4)}
DEFAULT_MODES = ("population", "trials")


def run_way(mode: str, work: pathlib.Path, args) -> dict:
    trials, members = (QUICK if args.quick else FULL)[mode]
    share = 1.0 / trials if args.gpu else 0.0
    sets = [
        f"tune.num_samples={trials * members}",
        f"trial.resources.gpu={share:g}",
        f"trial.resources.cpu={args.cpus_per_trial:g}",
        f"trial.train.num_seeds={args.seeds}",
        f"stop.training_iteration={args.calls}",
        f"trial.train.total_timesteps={8192 * args.calls}",
        "tune.reuse_actors=false",
        *([f"tune.population={members}"] if members > 1 else []),
    ]
    work.mkdir(parents=True)
    trace = work / "trace.jsonl"
    env = traced_env(trace, work / "cache")  # an empty cache: every way starts cold
    cmd = [*ajax_tune_command(), "run", str(CONFIG), "--storage-path", str(work / "results"), "--name", "search", "--no-plots"]
    if args.num_cpus:
        cmd += ["--num-cpus", str(args.num_cpus)]
    cmd += [a for s in sets for a in ("--set", s)]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    events = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    rows = {
        d.name: [json.loads(line) for line in (d / "result.json").read_text().splitlines() if line.strip()]
        for d in sorted((work / "results" / "search").glob("AjaxTrainable_*"))
    }
    if len(rows) != trials:
        raise RuntimeError(f"{mode}: expected {trials} trials, found {len(rows)}")
    reached = measure(rows, events, t0, args.threshold, lanes=members * args.seeds)
    return {
        "mode": mode,
        "trials": trials,
        "members_per_trial": members,
        "wall_s": round(wall, 2),
        **reached,
        "alarms": alarms(proc.stdout + proc.stderr),
    }


def measure(rows: dict[str, list[dict]], events: list[dict], t0: float, threshold: float, lanes: int) -> dict:
    """What a way reached, from every trial's rows and the trace: the first moment a trial's
    headline return was at the threshold, the env steps every lane had trained by then,
    throughput, compiles and platforms. `lanes`: lanes per trial."""
    step_ends: dict[int, list[float]] = {}
    platforms = set()
    for e in events:
        if e["event"] == "trial_step:end":
            step_ends.setdefault(e["pid"], []).append(e["t"])
        elif e["event"] == "jax_platform":
            platforms.add(e["platform"])

    def ended(row: dict) -> float:
        """When the call that reported `row` ended (its trial's n-th call)."""
        return step_ends[row["pid"]][row["training_iteration"] - 1]

    solves = []
    for name, trial in rows.items():
        row = next((r for r in trial if r.get(METRIC, -float("inf")) >= threshold), None)
        if row is not None:
            solves.append((ended(row), name, row))
    first = min(solves, key=lambda s: s[0], default=None)
    steps = None
    if first is not None:  # every lane's env steps, in every trial, at the end of that call
        steps = sum(max((r["env_steps"] for r in trial if ended(r) <= first[0]), default=0) for trial in rows.values()) * lanes
    # Throughput past the compiles: every lane's env steps in the calls after each trial's first,
    # over the time from the earliest end of a first call to the latest end of a last one (trials
    # that ran their calls one after another count their sum, not each one's rate).
    later = [trial for trial in rows.values() if len(trial) > 1]
    span = max((ended(t[-1]) for t in later), default=0.0) - min((ended(t[0]) for t in later), default=0.0)
    trained = sum(r["timesteps_this_iter"] for t in later for r in t[1:]) * lanes
    rates = [statistics.median(r["perf/env_steps_per_s"] for r in t[1:]) for t in later]
    return {
        "solved": first is not None,
        "solve_s": None if first is None else round(first[0] - t0, 3),
        "solved_by": None if first is None else first[1],
        "solved_at_call": None if first is None else first[2]["training_iteration"],
        "env_steps_at_solve": steps,
        "env_steps_per_s": round(trained / span, 1) if span > 0 else None,
        "env_steps_per_s_by_trial": [round(r, 1) for r in rates],  # each trial's median call, while the others ran
        "lanes": lanes * len(rows),
        "calls": [len(trial) for trial in rows.values()],
        "best_return": max(r.get(METRIC, -float("inf")) for trial in rows.values() for r in trial),
        "compilations": [trial[-1].get("perf/compilations") for trial in rows.values()],
        "platforms": sorted(platforms),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", default=list(DEFAULT_MODES), choices=list(FULL))
    parser.add_argument("--repeats", type=int, default=1, help="rounds, alternated")
    parser.add_argument("--threshold", type=float, default=500.0)
    parser.add_argument("--calls", type=int, default=40, help="calls of 8,192 env steps per seed that every trial runs")
    parser.add_argument("--seeds", type=int, default=4, help="seeds per config")
    parser.add_argument("--cpus-per-trial", type=float, default=2.0)
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a way's run is cut off")
    parser.add_argument("--quick", action="store_true", help="on the CPU: 8 configs x 2 seeds, threshold 400, 4 calls")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    args.gpu = not args.quick
    if args.quick:
        args.threshold, args.calls, args.seeds, args.cpus_per_trial = min(args.threshold, 400.0), 4, 2, 1.0

    runs: dict[str, list[dict]] = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory(prefix="gpu_population_") as tmp:
        for r in range(args.repeats):
            for mode in args.modes if r % 2 == 0 else args.modes[::-1]:
                out = run_way(mode, pathlib.Path(tmp) / f"{mode}{r}", args)
                runs[mode].append(out)
                print(
                    f"[{mode} {r + 1}/{args.repeats}] {out['trials']} trial(s) x {out['members_per_trial']} member(s), "
                    f"{out['lanes']} lanes on {out['platforms']}: solved {out['solved']} at {out['solve_s']} s, "
                    f"{out['env_steps_per_s'] or 0:,.0f} env steps/s, compilations {out['compilations']}, wall {out['wall_s']} s",
                    flush=True,
                )

    summary = {
        mode: {
            "solve_s_median": statistics.median(o["solve_s"] for o in outs) if all(o["solved"] for o in outs) else None,
            "env_steps_per_s_median": statistics.median(o["env_steps_per_s"] or 0.0 for o in outs),
            "wall_s_median": statistics.median(o["wall_s"] for o in outs),
            "lanes": outs[0]["lanes"],
        }
        for mode, outs in runs.items()
    }
    path = harness.write_results(
        "gpu_population" + ("_quick" if args.quick else ""),
        {
            "threshold": args.threshold,
            "calls": args.calls,
            "seeds_per_config": args.seeds,
            "env_steps_per_call_per_seed": 8192,
            "summary": summary,
        },
        args.out,
        raw={"runs": runs},
    )
    print(f"| way | lanes | seconds to a return of {args.threshold:g} | env steps/s | wall s |")
    print("|---|---|---|---|---|")
    for mode, s in summary.items():
        solve = "not solved" if s["solve_s_median"] is None else f"{s['solve_s_median']:.1f}"
        print(f"| {mode} | {s['lanes']} | {solve} | {s['env_steps_per_s_median']:,.0f} | {s['wall_s_median']:.1f} |")
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
