"""The same 8-config search four ways: Tune trials (without and with `reuse_actors`), one process
running the configs one after another, and one population trial holding all 8 as lanes.

The search is `configs/population_search_cartpole.yaml`: PPO on cartpole, 8 learning rates (a
grid over the schedule's peak), 2 seeds each, 4 calls of 8,192 env steps per seed. Each way runs
from a fresh process with an empty compilation cache of its own (cold):

- `tune`: `ajax-tune run` as shipped, `reuse_actors: false`: 8 trials, one CPU each, two at a
  time; trials share the (initially empty) cache, so a trial started after another compiled
  may load the program from it;
- `tune_reuse`: the same with `reuse_actors: true`: a finished trial's actor takes the next
  config through `reset_config`, keeping its process and compiled program;
- `sequential`: one Python process, one `Runner` reconfigured onto each config in turn (one
  compilation; `peers/ajax_tune_sequential.py`), both CPUs;
- `population`: `ajax-tune run` with `tune.population: 8`: the grid's 8 configs packed into one
  trial as 8 members x 2 seeds = 16 lanes (`ajax_tune.tune.searchers`), both CPUs.

Wall time is the whole command's, from its start to its exit (Ray's start included), and ratios
are against `sequential`. Every process is traced (`benchmarks/trace/sitecustomize.py`), which
gives the compile counts and, for `population`, where its seconds go: the driver's start and
imports, validation, Ray's start, the trial process's start and imports, its set-up (building
and compiling), its calls, and what follows the last call.

    python benchmarks/search_vs_sequential.py            # 8 configs x 4 calls, 3 repeats, alternated
    python benchmarks/search_vs_sequential.py --quick    # 4 configs x 2 calls, once

A change is measured against the tree before it with `--before DIR` (a checkout of the earlier
commit, e.g. from `git worktree add DIR COMMIT`): the mode `population_before` runs the
population trial with `ajax_tune` imported from DIR, alternated with the others.

    python benchmarks/search_vs_sequential.py --modes population population_before --before DIR --repeats 6
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import harness
import yaml
from time_to_solve import ajax_tune_command, alarms, breakdown, traced_env

HERE = pathlib.Path(__file__).resolve().parent
CONFIG = HERE / "configs" / "population_search_cartpole.yaml"
STEPS_PER_CALL = 8192
MODES = {
    "tune": {"sets": ["tune.reuse_actors=false"], "env": {}},
    "tune_reuse": {"sets": ["tune.reuse_actors=true"], "env": {}},
    "population": {"sets": ["tune.reuse_actors=false", "trial.resources.cpu=2"], "env": {}, "population": True},
    # not in the default set: the earlier comparison's baseline, every trial compiling everything
    "tune_no_cache": {"sets": ["tune.reuse_actors=false"], "env": {"JAX_ENABLE_COMPILATION_CACHE": "false"}},
}
MODES["population_before"] = {**MODES["population"], "before": True}  # ajax_tune from --before DIR
DEFAULT_MODES = ("tune", "tune_reuse", "sequential", "population")
# `ajax-tune` as a tree's own console script runs it: `entry` where the tree has one, else `main`
RUN_FROM_TREE = "import sys; from ajax_tune import cli; cli.entry() if hasattr(cli, 'entry') else sys.exit(cli.main())"
BIG_COMPILE_S = 0.5  # programs compiling longer than this are the train/init programs (the cache keeps those)


def learning_rates(count: int) -> list[float]:
    grid = yaml.safe_load(CONFIG.read_text())["trial"]["agent"]["lr"]["peak"]["grid"]
    return grid[:: len(grid) // count][:count] if count < len(grid) else grid


def cold_env(work: pathlib.Path, tree: str | None = None) -> dict:
    """A traced run's environment with an empty cache of its own: every way starts cold."""
    return traced_env(work / "trace.jsonl", work / "cache", tree)


def events_of(work: pathlib.Path) -> list[dict]:
    trace = work / "trace.jsonl"
    return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []


def compile_stats(events: list[dict]) -> dict:
    compiles = [e["seconds"] for e in events if e["event"] == "jax_duration" and e["name"].endswith("backend_compile_duration")]
    counts = collections.Counter(e["name"].rsplit("/", 1)[-1] for e in events if e["event"] == "jax_event")
    return {
        "programs_compiled": len(compiles),
        "big_programs_compiled": sum(c > BIG_COMPILE_S for c in compiles),
        "backend_compile_s": round(sum(compiles), 2),
        "cache_hits": counts.get("cache_hits", 0),
        "trial_processes": len({e["pid"] for e in events if e["event"] == "trial_setup:start"}),
        "reset_configs": sum(e["event"] == "trial_reset_config:start" for e in events),
    }


def tree_commit(tree: str) -> str:
    """The commit a checkout is at (what the JSON records of it; its path stays out)."""
    done = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def run_tune(mode: str, work: pathlib.Path, lrs: list[float], iterations: int, cpus: int, before: str | None = None) -> dict:
    spec = MODES[mode]
    tree = before if spec.get("before") else None
    if spec.get("before") and not tree:
        raise SystemExit(f"{mode} needs --before DIR, a checkout of the earlier tree")
    work.mkdir(parents=True)
    sets = [
        *spec["sets"],
        f"trial.agent.lr.peak={{grid: {json.dumps(lrs)}}}",
        f"stop.training_iteration={iterations}",
        f"trial.train.total_timesteps={STEPS_PER_CALL * iterations}",
        *([f"tune.population={len(lrs)}"] if spec.get("population") else []),
    ]
    # -P: `python -c` would put the working directory (this checkout) before PYTHONPATH
    script = [sys.executable, "-P", "-c", RUN_FROM_TREE] if tree else ajax_tune_command()
    cmd = [*script, "run", str(CONFIG), "--storage-path", str(work / "results"), "--name", "search"]
    cmd += ["--no-plots", "--num-cpus", str(cpus), *[a for s in sets for a in ("--set", s)]]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**cold_env(work, tree), **spec["env"]}, timeout=3600)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    trials = []
    for d in sorted((work / "results" / "search").glob("AjaxTrainable_*")):
        rows = [json.loads(line) for line in (d / "result.json").read_text().splitlines() if line.strip()]
        trials.append(rows[-1])
    returns = sorted(
        value
        for row in trials
        for value in (
            [row[f"member/{k}/eval/return_mean"] for k in range(int(row["population/size"]))]
            if "population/size" in row
            else [row["eval/return_mean"]]
        )
    )
    events = events_of(work)
    out = {
        "mode": mode,
        "wall_s": round(wall, 2),
        "configs": sum(int(row.get("population/size", 1)) for row in trials),
        "trials": len(trials),
        "eval_returns_sorted": returns,
        "compilations_per_trial": [row.get("perf/compilations") for row in trials],
        **compile_stats(events),
        "alarms": alarms(proc.stdout + proc.stderr),
    }
    if tree:
        out["tree_commit"] = tree_commit(tree)
    if spec.get("population"):
        out["breakdown"] = where_the_time_goes(events, t0, trials[0], wall)
    return out


def where_the_time_goes(events: list[dict], t0: float, last_row: dict, wall: float) -> dict:
    """The population run's seconds, step by step, from the trace (`time_to_solve.breakdown`
    with the trial's last call as the end), and what is left after the tuner's fit."""
    full = breakdown(events, t0, last_row)
    at, spans = full.get("at", {}), dict(full.get("spans", {}))
    spans["calls"] = spans.pop("later_steps_to_solve", None)
    if spans.get("first_step") is not None and spans.get("calls") is not None:
        spans["calls"] = round(spans["calls"] + spans.pop("first_step"), 3)
    fit_end = at.get("tuner_fit_end")
    last_call_end = at.get("solving_step_end")
    spans["last_call_to_fit_end"] = None if fit_end is None or last_call_end is None else round(fit_end - last_call_end, 3)
    spans["after_fit"] = None if fit_end is None else round(wall - fit_end, 3)
    by_driver = [e for e in events if e.get("pid") == next((e["pid"] for e in events if e["event"] == "validate:start"), None)]
    for label in ("report", "ray_stop"):  # what after_fit holds
        start = next((e["t"] for e in by_driver if e["event"] == f"{label}:start"), None)
        end = next((e["t"] for e in by_driver if e["event"] == f"{label}:end"), None)
        spans[f"after_fit_{label}"] = None if start is None or end is None else round(end - start, 3)
    return {"spans": spans, "compile": full.get("compile", {}), "imports": full.get("imports", {})}


def run_sequential(work: pathlib.Path, lrs: list[float], iterations: int, cpus: int) -> dict:
    work.mkdir(parents=True)
    trial = yaml.safe_load(CONFIG.read_text())["trial"]
    trial["train"]["total_timesteps"] = STEPS_PER_CALL * iterations
    configs = []
    for lr in lrs:
        config = json.loads(json.dumps(trial))
        config["agent"]["lr"]["peak"] = lr
        configs.append(config)
    settings = {"configs": configs, "iterations": iterations, "cpus": cpus}
    out = harness.run_worker(sys.executable, "ajax_tune_sequential.py", settings, extra_env=cold_env(work))
    return {
        "mode": "sequential",
        "wall_s": out["process_wall_s"],  # from the process's start to its exit, as for the commands
        "inner_wall_s": out["wall_s"],
        "configs": len(configs),
        "trials": 0,
        "eval_returns_sorted": sorted(t["eval_return"] for t in out["trials"]),
        "compilations": out["compilations"],
        **compile_stats(events_of(work)),
    }


def summarize(runs: dict[str, list[dict]]) -> dict:
    base = statistics.median(o["wall_s"] for o in runs["sequential"]) if runs.get("sequential") else None
    summary = {}
    for mode, outs in runs.items():
        if not outs:
            continue
        wall = statistics.median(o["wall_s"] for o in outs)
        summary[mode] = {
            "wall_s_median": wall,
            "wall_s_all": [o["wall_s"] for o in outs],
            "vs_sequential": None if base is None else round(wall / base, 2),
            "trials": outs[0]["trials"],
            "big_programs_compiled_median": statistics.median(o["big_programs_compiled"] for o in outs),
            "backend_compile_s_median": statistics.median(o["backend_compile_s"] for o in outs),
            "cache_hits_median": statistics.median(o["cache_hits"] for o in outs),
        }
        spans = [o["breakdown"]["spans"] for o in outs if o.get("breakdown")]
        if spans:
            summary[mode]["breakdown_median_s"] = {
                key: statistics.median(s[key] for s in spans if s.get(key) is not None)
                for key in spans[0]
                if any(s.get(key) is not None for s in spans)
            }
    return summary


def table(summary: dict) -> str:
    lines = ["| way | wall s (median) | vs one process | trials | big programs compiled | s in XLA compile |"]
    lines.append("|---|---|---|---|---|---|")
    for mode, s in summary.items():
        ratio = "" if s["vs_sequential"] is None else f"{s['vs_sequential']:.2f}x"
        lines.append(
            f"| {mode} | {s['wall_s_median']:.1f} | {ratio} | {s['trials']} | {s['big_programs_compiled_median']:g} | "
            f"{s['backend_compile_s_median']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=8, help="learning rates searched (every other of the grid when fewer)")
    parser.add_argument("--iterations", type=int, default=4, help=f"calls of {STEPS_PER_CALL:,} env steps per seed")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=list(DEFAULT_MODES), choices=[*MODES, "sequential"])
    parser.add_argument("--quick", action="store_true", help="4 configs of 2 calls, once")
    parser.add_argument("--before", default=None, help="a checkout of an earlier tree, for the mode population_before")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.configs, args.iterations, args.repeats = 4, 2, 1
    lrs = learning_rates(args.configs)

    runs = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory(prefix="search_vs_sequential_") as tmp:
        for r in range(args.repeats):
            for mode in args.modes if r % 2 == 0 else args.modes[::-1]:  # alternated, round by round
                work = pathlib.Path(tmp) / f"{mode}{r}"
                if mode == "sequential":
                    out = run_sequential(work, lrs, args.iterations, args.num_cpus)
                else:
                    out = run_tune(mode, work, lrs, args.iterations, args.num_cpus, args.before)
                runs[mode].append(out)
                print(
                    f"[{mode} {r + 1}/{args.repeats}] wall {out['wall_s']:.1f} s, {out['trials']} trial(s), "
                    f"{out['big_programs_compiled']} big programs compiled ({out['backend_compile_s']:.1f} s in XLA), "
                    f"{out['cache_hits']} cache hits",
                    flush=True,
                )

    summary = summarize(runs)
    path = harness.write_results(
        "search_vs_sequential" + ("_quick" if args.quick else ""),
        {
            "configs": len(lrs),
            "learning_rates": lrs,
            "seeds_per_config": 2,
            "iterations": args.iterations,
            "env_steps_per_call_per_seed": STEPS_PER_CALL,
            "before_commit": tree_commit(args.before) if args.before else None,
            "summary": summary,
        },
        args.out,
        raw={"runs": runs},
    )
    print(table(summary))
    for mode, s in summary.items():
        if "breakdown_median_s" in s:
            print(
                f"{mode}: where the seconds go (median): " + ", ".join(f"{k} {v:.2f}" for k, v in s["breakdown_median_s"].items())
            )
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
