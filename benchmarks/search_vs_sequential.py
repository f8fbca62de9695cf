"""An 8-trial random search on 2 CPUs through Tune, against the same 8 configs run one after
another in one process: what the shared compilation cache and `reuse_actors` buy.

The search is `configs/search_cartpole.yaml` (traced hyperparameters only, so every trial can
run one compiled program; one CPU per trial, two at a time), run by `ajax-tune run` as a user
would, in three ways, each with a fresh compilation cache:

- `tune_no_cache`: reuse_actors off, the persistent compilation cache switched off
  (JAX_ENABLE_COMPILATION_CACHE=false): every trial process compiles everything;
- `tune_cache`: reuse_actors off, the shared cache on: a trial started after another finished
  compiling loads the program from disk instead;
- `tune_reuse`: reuse_actors on (and the cache): a finished trial's actor takes the next
  config through `reset_config`, keeping its process, imports and compiled program.

`sequential` trains the 8 configs the search drew (read back from the trials' params.json) in
one process with one `Runner` (`peers/ajax_tune_sequential.py`), using both CPUs.

Wall time is the whole command's (Ray's start included for Tune); compile figures come from
the trace of every process (`benchmarks/trace/sitecustomize.py`): programs compiled by XLA,
seconds spent there, and persistent-cache hits.

    python benchmarks/search_vs_sequential.py            # 8 trials x 4 iterations, 2 repeats
    python benchmarks/search_vs_sequential.py --quick    # 4 trials x 2 iterations, once
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import harness
from time_to_solve import TRACE_DIR, ajax_tune_command, alarms

HERE = pathlib.Path(__file__).resolve().parent
CONFIG = HERE / "configs" / "search_cartpole.yaml"
MODES = {
    "tune_no_cache": {"reuse": False, "env": {"JAX_ENABLE_COMPILATION_CACHE": "false"}},
    "tune_cache": {"reuse": False, "env": {}},
    "tune_reuse": {"reuse": True, "env": {}},
}
BIG_COMPILE_S = 0.5  # programs compiling longer than this are the train/init programs (the cache keeps those)


def traced_env(work: pathlib.Path, extra: dict) -> dict:
    env = harness.worker_env()
    env.update(
        {
            "AJAX_TUNE_BENCH_TRACE": str(work / "trace.jsonl"),
            "AJAX_TUNE_COMPILATION_CACHE": str(work / "cache"),
            "PYTHONPATH": os.pathsep.join(p for p in (str(TRACE_DIR), env.get("PYTHONPATH", "")) if p),
            **extra,
        }
    )
    return env


def compile_stats(work: pathlib.Path) -> dict:
    trace = work / "trace.jsonl"
    events = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    compiles = [e["seconds"] for e in events if e["event"] == "jax_duration" and e["name"].endswith("backend_compile_duration")]
    counts = collections.Counter(e["name"].rsplit("/", 1)[-1] for e in events if e["event"] == "jax_event")
    trial_pids = {e["pid"] for e in events if e["event"] == "trial_setup:start"}
    return {
        "programs_compiled": len(compiles),
        "big_programs_compiled": sum(c > BIG_COMPILE_S for c in compiles),
        "backend_compile_s": round(sum(compiles), 2),
        "cache_hits": counts.get("cache_hits", 0),
        "cache_misses": counts.get("cache_misses", 0),
        "trial_processes": len(trial_pids),
        "trial_setups": sum(e["event"] == "trial_setup:start" for e in events),
        "reset_configs": sum(e["event"] == "trial_reset_config:start" for e in events),
    }


def run_tune(mode: str, work: pathlib.Path, trials: int, iterations: int, cpus: int) -> dict:
    spec = MODES[mode]
    work.mkdir(parents=True)
    sets = [
        f"tune.num_samples={trials}",
        f"tune.reuse_actors={'true' if spec['reuse'] else 'false'}",
        f"stop.training_iteration={iterations}",
        f"trial.train.total_timesteps={8192 * iterations}",
    ]
    cmd = [
        *ajax_tune_command(),
        "run",
        str(CONFIG),
        "--storage-path",
        str(work / "results"),
        "--name",
        "search",
        "--no-plots",
        "--num-cpus",
        str(cpus),
        *[a for s in sets for a in ("--set", s)],
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=traced_env(work, spec["env"]), timeout=3600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    trial_dirs = sorted((work / "results" / "search").glob("AjaxTrainable_*"))
    configs, last = [], []
    for d in trial_dirs:
        configs.append(json.loads((d / "params.json").read_text()))
        rows = [json.loads(line) for line in (d / "result.json").read_text().splitlines() if line.strip()]
        last.append(
            {
                "eval_return": rows[-1].get("eval/return_mean"),
                "compilations": rows[-1].get("perf/compilations"),
                "iterations": rows[-1]["training_iteration"],
            }
        )
    return {
        "mode": mode,
        "wall_s": round(wall, 2),
        "trials": last,
        "configs": configs,
        **compile_stats(work),
        "alarms": alarms(proc.stdout + proc.stderr),
    }


def run_sequential(configs: list[dict], work: pathlib.Path, iterations: int, cpus: int) -> dict:
    work.mkdir(parents=True)
    settings = {"configs": configs, "iterations": iterations, "cpus": cpus}
    out = harness.run_worker(sys.executable, "ajax_tune_sequential.py", settings, extra_env=traced_env(work, {}))
    return {"mode": "sequential", **out, **compile_stats(work)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=4, help="calls of 8,192 env steps per trial")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=[*MODES, "sequential"], choices=[*MODES, "sequential"])
    parser.add_argument("--quick", action="store_true", help="4 trials of 2 iterations, once")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.iterations, args.repeats = 4, 2, 1

    runs = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory(prefix="search_vs_sequential_") as tmp:
        for r in range(args.repeats):
            configs = None
            order = (
                args.modes
                if r % 2 == 0
                else [m for m in args.modes[::-1] if m != "sequential"] + (["sequential"] if "sequential" in args.modes else [])
            )  # sequential needs the drawn configs
            for mode in order:
                work = pathlib.Path(tmp) / f"{mode}{r}"
                if mode == "sequential":
                    if configs is None:
                        configs = run_tune("tune_reuse", pathlib.Path(tmp) / f"draw{r}", args.trials, 1, args.num_cpus)["configs"]
                    out = run_sequential(configs, work, args.iterations, args.num_cpus)
                else:
                    out = run_tune(mode, work, args.trials, args.iterations, args.num_cpus)
                    configs = configs or out["configs"]
                runs[mode].append(out)
                print(
                    f"[{mode} {r + 1}/{args.repeats}] wall {out['wall_s']:.1f} s, {out['big_programs_compiled']} big programs "
                    f"compiled ({out['backend_compile_s']:.1f} s in XLA), {out['cache_hits']} cache hits, "
                    f"{out.get('trial_processes', 0)} trial processes",
                    flush=True,
                )

    summary = {
        m: {
            "wall_s_median": statistics.median(o["wall_s"] for o in rs),
            "big_programs_compiled_median": statistics.median(o["big_programs_compiled"] for o in rs),
            "backend_compile_s_median": statistics.median(o["backend_compile_s"] for o in rs),
            "cache_hits_median": statistics.median(o["cache_hits"] for o in rs),
        }
        for m, rs in runs.items()
        if rs
    }
    path = harness.write_results(
        "search_vs_sequential" + ("_quick" if args.quick else ""),
        {"trials": args.trials, "iterations": args.iterations, "summary": summary, "runs": runs},
        args.out,
    )
    print("| mode | wall s | big programs compiled | s in XLA compile | cache hits |\n|---|---|---|---|---|")
    for m, s in summary.items():
        print(
            f"| {m} | {s['wall_s_median']:.1f} | {s['big_programs_compiled_median']:g} | "
            f"{s['backend_compile_s_median']:.1f} | {s['cache_hits_median']:g} |"
        )
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
