"""Time to solve CartPole through the main job: `ajax-tune run` against RLlib's PPO.

Wall time counts from the moment `ajax-tune run CONFIG` is started as a subprocess (Ray's
start, imports and compilation included) until a trial's evaluation return reaches the
threshold (475), read from the run's own output: the first row of the trial's `result.json` at
or past the threshold, timed by the file's modification (the config stops the run at that row,
so it is the file's last write; otherwise the row's whole-second `timestamp`). Each run gets a
fresh compilation cache (`AJAX_TUNE_COMPILATION_CACHE`): *cold* runs start with it empty,
*warm* runs reuse the one the cold run just filled. RLlib's PPO on gymnasium's CartPole-v1
(`peers/rllib_ppo.py`, its own venv) runs to the same threshold, from its own process start.

Where the time goes comes from `benchmarks/trace/sitecustomize.py`, loaded by every Python
process of the run through PYTHONPATH: each writes when it started, when jax, ray and ajax_tune
imported, and when validation, Ray's start, the trial's set-up and its calls began and ended,
and JAX's compile events. The JSON holds each run's breakdown.

    python benchmarks/time_to_solve.py                 # 3 rounds: cold + warm, and RLlib
    python benchmarks/time_to_solve.py --quick         # one round, RLlib cut off after 120 s
    python benchmarks/time_to_solve.py --no-rllib --xla-flags=--xla_cpu_use_fusion_emitters=false
                                                       # ours as shipped against ours with those XLA flags

With `--xla-flags`, every round also runs ours with `XLA_FLAGS` set to them (the driver's and,
through Ray, the trial's), alternated with the run as shipped, each with a cache of its own.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness

HERE = pathlib.Path(__file__).resolve().parent
CONFIG = HERE / "configs" / "solve_cartpole.yaml"
TRACE_DIR = HERE / "trace"
METRIC = "eval/return_mean"


def ajax_tune_command() -> list[str]:
    """The console script a user runs: from this interpreter's environment, else from PATH (a
    project installed into another prefix, as on a machine whose Python is not a venv's)."""
    script = pathlib.Path(sys.executable).parent / "ajax-tune"
    found = str(script) if script.exists() else shutil.which("ajax-tune")
    if found is None:
        raise SystemExit(f"no ajax-tune script beside {sys.executable} or on PATH; install the project (pip install -e .)")
    return [found]


def traced_env(trace: pathlib.Path, cache: pathlib.Path, tree: str | None = None) -> dict[str, str]:
    """The environment of a traced `ajax-tune` process: every Python process it starts loads the
    trace hook (`trace/sitecustomize.py`) and writes to `trace`, and JAX's persistent cache is
    `cache`. `tree`: a checkout whose `ajax_tune` is imported instead of this one's."""
    env = harness.worker_env()
    env.update(
        {
            "AJAX_TUNE_BENCH_TRACE": str(trace),
            "AJAX_TUNE_COMPILATION_CACHE": str(cache),
            "PYTHONPATH": os.pathsep.join(p for p in (str(TRACE_DIR), tree or "", env.get("PYTHONPATH", "")) if p),
        }
    )
    return env


def run_ajax_tune(
    config: pathlib.Path,
    cache: pathlib.Path,
    threshold: float,
    work: pathlib.Path,
    extra: list[str],
    timeout: float,
    xla_flags: str | None = None,
) -> dict:
    """One `ajax-tune run` from a fresh process; returns when it solved and where the time went.
    `xla_flags` are added to the process's `XLA_FLAGS`."""
    work.mkdir(parents=True)
    trace = work / "trace.jsonl"
    env = traced_env(trace, cache)
    if xla_flags:
        env["XLA_FLAGS"] = " ".join(f for f in (env.get("XLA_FLAGS", ""), xla_flags) if f)
    cmd = [
        *ajax_tune_command(),
        "run",
        str(config),
        "--storage-path",
        str(work / "results"),
        "--name",
        "solve",
        "--no-plots",
        *extra,
    ]
    cache_entries_before = sum(1 for _ in cache.glob("*")) if cache.exists() else 0
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    t_exit = time.time()
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-30:])
        raise RuntimeError(f"ajax-tune run failed (exit {proc.returncode}):\n{tail}")
    rows, result_file = trial_rows(work / "results" / "solve")
    solved_row = next((r for r in rows if r.get(METRIC, -float("inf")) >= threshold), None)
    solved_at = None
    if solved_row is not None:
        last = solved_row is rows[-1]
        solved_at = result_file.stat().st_mtime_ns / 1e9 if last else float(solved_row["timestamp"])
    events = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    return {
        "exit_status": proc.returncode,
        "solved": solved_row is not None,
        "solve_s": None if solved_at is None else round(solved_at - t0, 3),
        "solved_at_iteration": None if solved_row is None else solved_row["training_iteration"],
        "env_steps_to_solve": None if solved_row is None else solved_row.get("env_steps"),
        "eval_returns": [r.get(METRIC) for r in rows],
        "process_wall_s": round(t_exit - t0, 3),
        "cache_entries_before": cache_entries_before,
        "cache_entries_after": sum(1 for _ in cache.glob("*")),
        "alarms": alarms(output),
        "breakdown": breakdown(events, t0, solved_row),
    }


def trial_rows(experiment: pathlib.Path) -> tuple[list[dict], pathlib.Path]:
    files = sorted(experiment.glob("*/result.json"))
    if len(files) != 1:
        raise RuntimeError(f"expected one trial under {experiment}, found {len(files)}")
    rows = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    return rows, files[0]


ALARMS = ("os.fork() was called", "Failed to import warp", "Token authentication is", "WARNING", "Warning", "Traceback")


ABSOLUTE_DIRS = re.compile(r"(?<![\w.~])/(?:[^/\s:'\"]+/)+")  # a path's directories, cut from alarms


def alarms(output: str) -> list[str]:
    """Lines of the run's output a user would read as something going wrong, each absolute path
    cut to its file name (`DIR/subprocess.py:1883`): the record names no machine's directories."""
    return [ABSOLUTE_DIRS.sub("DIR/", line.strip())[:200] for line in output.splitlines() if any(a in line for a in ALARMS)]


def breakdown(events: list[dict], t0: float, solved_row: dict | None) -> dict:
    """Seconds from the start of `ajax-tune run` to each step of the way, and the length of
    each step, from the trace: the driver is the process that validated the config, the trial
    the one that reported the result."""
    if not events:
        return {}
    by_pid = collections.defaultdict(list)
    for e in events:
        by_pid[e["pid"]].append(e)
    driver = next((pid for pid, evs in by_pid.items() if any(e["event"] == "validate:start" for e in evs)), None)
    trial = solved_row.get("pid") if solved_row else None
    if trial not in by_pid:
        trial = next((pid for pid, evs in by_pid.items() if any(e["event"] == "trial_setup:start" for e in evs)), None)

    def at(pid, event, nth=0):
        hits = [e["t"] for e in by_pid.get(pid, ()) if e["event"] == event]
        return hits[nth] if len(hits) > nth else None

    def span(pid, label, nth=0):
        start, end = at(pid, label + ":start", nth), at(pid, label + ":end", nth)
        return None if start is None or end is None else round(end - start, 3)

    def imports(pid):
        out = {}
        for e in by_pid.get(pid, ()):
            if e["event"] == "import:start":
                end = next(
                    (
                        f["t"]
                        for f in by_pid[pid]
                        if f["event"] == "import:end" and f["module"] == e["module"] and f["t"] >= e["t"]
                    ),
                    None,
                )
                if end is not None and e["module"] not in out:
                    out[e["module"]] = round(end - e["t"], 3)
        return out

    def compiles(pid, since=None, until=None):
        evs = [e for e in by_pid.get(pid, ()) if (since is None or e["t"] >= since) and (until is None or e["t"] <= until)]
        backend = [e["seconds"] for e in evs if e["event"] == "jax_duration" and e["name"].endswith("backend_compile_duration")]
        trace = [e["seconds"] for e in evs if e["event"] == "jax_duration" and e["name"].endswith("jaxpr_trace_duration")]
        lower = [e["seconds"] for e in evs if e["event"] == "jax_duration" and e["name"].endswith("to_mlir_module_duration")]
        retrieve = [e["seconds"] for e in evs if e["event"] == "jax_duration" and "cache_retrieval" in e["name"]]
        counts = collections.Counter(e["name"].rsplit("/", 1)[-1] for e in evs if e["event"] == "jax_event")
        return {
            "backend_compiles": len(backend),
            "backend_compile_s": round(sum(backend), 3),
            "trace_s": round(sum(trace), 3),
            "lower_s": round(sum(lower), 3),
            "cache_retrieval_s": round(sum(retrieve), 3),
            "cache_hits": counts.get("cache_hits", 0),
            "cache_misses": counts.get("cache_misses", 0),
        }

    rel = lambda t: None if t is None else round(t - t0, 3)  # noqa: E731
    trial_start = at(trial, "process")
    step_ends = [e["t"] for e in by_pid.get(trial, ()) if e["event"] == "trial_step:end"]
    solved_iter = solved_row["training_iteration"] if solved_row else None
    solved_step_end = step_ends[solved_iter - 1] if solved_iter and len(step_ends) >= solved_iter else None
    processes = {pid: (evs[0].get("argv") or ["?"])[0].rsplit("/", 1)[-1] for pid, evs in by_pid.items()}
    first_step = (at(trial, "trial_step:start"), at(trial, "trial_step:end"))
    setup = (at(trial, "trial_setup:start"), at(trial, "trial_setup:end"))
    return {
        # moments, seconds after `ajax-tune run` started
        "at": {
            "driver_python_ready": rel(at(driver, "process")),
            "validate_start": rel(at(driver, "validate:start")),
            "ray_start_begin": rel(at(driver, "ray_start:start")),
            "ray_start_end": rel(at(driver, "ray_start:end")),
            "tuner_fit_start": rel(at(driver, "tuner_fit:start")),
            "trial_process_start": rel(trial_start),
            "trial_setup_start": rel(setup[0]),
            "trial_setup_end": rel(setup[1]),
            "first_step_end": rel(first_step[1]),
            "solving_step_end": rel(solved_step_end),
            "tuner_fit_end": rel(at(driver, "tuner_fit:end")),
        },
        # lengths of the steps, seconds
        "spans": {
            "driver_start_and_imports": round(at(driver, "validate:start") - t0, 3) if at(driver, "validate:start") else None,
            "validate": span(driver, "validate"),
            "ray_start": span(driver, "ray_start"),
            "build_tuner": span(driver, "build_tuner"),
            "fit_to_trial_process": None
            if trial_start is None or at(driver, "tuner_fit:start") is None
            else round(trial_start - at(driver, "tuner_fit:start"), 3),
            "trial_imports": None if trial_start is None or setup[0] is None else round(setup[0] - trial_start, 3),
            "trial_setup": span(trial, "trial_setup"),
            "first_step": span(trial, "trial_step"),
            "later_steps_to_solve": None
            if solved_step_end is None or first_step[1] is None
            else round(solved_step_end - first_step[1], 3),
        },
        "compile": {
            "trial_setup": compiles(trial, *setup),
            "first_step": compiles(trial, *first_step),
            "trial_total": compiles(trial),
            "driver": compiles(driver),
        },
        "imports": {"driver": imports(driver), "trial": imports(trial)},
        "processes": {"count": len(by_pid), "programs": collections.Counter(processes.values())},
    }


def run_rllib(args, budget: float) -> dict:
    python = harness.peer_python("rllib", args.peer_root)
    settings = {"threshold": args.threshold, "max_seconds": budget, "num_cpus": args.num_cpus}
    out = harness.run_worker(python, "rllib_ppo.py", settings, timeout=budget + 300)
    solved, solved_train = out.get("solved"), out.get("solved_train")
    out["solve_s"] = solved["wall_s"] if solved else None
    out["solve_train_s"] = solved_train["wall_s"] if solved_train else None
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(CONFIG), help="the experiment `ajax-tune run` runs")
    parser.add_argument("--threshold", type=float, default=475.0)
    parser.add_argument("--repeats", type=int, default=3, help="rounds: a cold and a warm run of ours, one of RLlib")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of each side's local Ray")
    parser.add_argument("--rllib-budget", type=float, default=900.0, help="seconds before RLlib's run is cut off")
    parser.add_argument("--no-rllib", action="store_true", help="time ajax-tune only")
    parser.add_argument("--peer-root", default=None)
    parser.add_argument("--quick", action="store_true", help="one round; RLlib cut off after 120 s")
    parser.add_argument(
        "--xla-flags",
        default=None,
        help="also run ours with these XLA flags (e.g. --xla_cpu_use_fusion_emitters=false), alternated with ours as shipped",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.rllib_budget = 1, min(args.rllib_budget, 120.0)

    config = pathlib.Path(args.config).resolve()
    extra = ["--num-cpus", str(args.num_cpus), "--set", f"stop.{METRIC}={args.threshold}"]
    variants = {"ajax_tune": None, **({"ajax_tune_flags": args.xla_flags} if args.xla_flags else {})}
    runs = {f"{v}_{mode}": [] for v in variants for mode in ("cold", "warm")} | {"rllib": []}
    with tempfile.TemporaryDirectory(prefix="time_to_solve_") as tmp:
        for r in range(args.repeats):
            sides = [*variants, "rllib"]
            sides = sides if r % 2 == 0 else sides[::-1]
            for side in sides:
                if side == "rllib":
                    if args.no_rllib:
                        continue
                    out = run_rllib(args, args.rllib_budget)
                    runs["rllib"].append(out)
                    solved = f"{out['solve_s']:.1f} s" if out["solve_s"] else f"no (cut off after {args.rllib_budget:.0f} s)"
                    train = f"{out['solve_train_s']:.1f} s" if out["solve_train_s"] else "not reached"
                    print(
                        f"[rllib {r + 1}/{args.repeats}] evaluation return solved in {solved}; training return {train}",
                        flush=True,
                    )
                    continue
                cache = pathlib.Path(tmp) / f"cache_{side}{r}"  # empty for the cold run, filled by it for the warm one
                for mode in ("cold", "warm"):
                    work = pathlib.Path(tmp) / f"{side}_{mode}{r}"
                    out = run_ajax_tune(config, cache, args.threshold, work, extra, timeout=1800, xla_flags=variants[side])
                    runs[f"{side}_{mode}"].append(out)
                    spans = out["breakdown"].get("spans", {})
                    print(
                        f"[{side} {mode} {r + 1}/{args.repeats}] solved in {out['solve_s']} s at iteration "
                        f"{out['solved_at_iteration']} (process {out['process_wall_s']} s); "
                        + ", ".join(f"{k} {v}" for k, v in spans.items() if v is not None)
                        + (f"; alarms: {out['alarms']}" if out["alarms"] else ""),
                        flush=True,
                    )

    summary = {side: summarize(rs) for side, rs in runs.items() if rs}
    path = harness.write_results(
        "time_to_solve" + ("_quick" if args.quick else ""),
        {
            "config": str(harness._relative(str(config))),
            "threshold": args.threshold,
            "xla_flags": variants,
            "summary": summary,
        },
        args.out,
        raw={"runs": runs},
    )
    print(table(summary))
    print(f"(written to {path})")


def summarize(runs: list[dict]) -> dict:
    times = [r["solve_s"] for r in runs if r.get("solve_s") is not None]
    out = {
        "solved": f"{len(times)}/{len(runs)}",
        "solve_s": {"median": statistics.median(times), "min": min(times), "max": max(times)} if times else None,
        "solve_s_per_round": [r.get("solve_s") for r in runs],
        "solved_at_iteration_per_round": [r.get("solved_at_iteration") for r in runs if "solved_at_iteration" in r] or None,
    }
    train_times = [r["solve_train_s"] for r in runs if r.get("solve_train_s") is not None]
    if train_times:  # RLlib's: its training return's crossing
        out["solve_train_s"] = {"median": statistics.median(train_times), "min": min(train_times), "max": max(train_times)}
    spans = [r["breakdown"]["spans"] for r in runs if r.get("breakdown", {}).get("spans")]
    if spans:
        out["spans_median"] = {
            k: statistics.median(s[k] for s in spans if s.get(k) is not None)
            for k in spans[0]
            if any(s.get(k) is not None for s in spans)
        }
    compiles = [r["breakdown"]["compile"]["trial_total"] for r in runs if r.get("breakdown", {}).get("compile")]
    if compiles:
        out["trial_compile_median"] = {k: statistics.median(c[k] for c in compiles) for k in compiles[0]}
    alarms_seen = sorted({a for r in runs for a in r.get("alarms", ())})
    if alarms_seen:
        out["alarms"] = alarms_seen
    return out


def table(summary: dict) -> str:
    def cell(t):
        return f"{t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f})" if t else "-"

    lines = [
        "| side | solved | seconds to evaluation return 475 (median, min-max) | to training return 475 |",
        "|---|---|---|---|",
    ]
    for side, s in summary.items():
        lines.append(f"| {side} | {s['solved']} | {cell(s['solve_s'])} | {cell(s.get('solve_train_s'))} |")
    for side, s in summary.items():
        if "spans_median" in s:
            lines.append(f"\n{side}: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["spans_median"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
