"""Tune's overhead on a trial: each iteration against the jitted call inside it, and the trial
process's memory over 50 iterations.

One `ajax-tune run` of `configs/overhead_cartpole.yaml` (one trial, calls of about a second, 50
iterations, no checkpoints), traced by `benchmarks/trace/sitecustomize.py`. For every iteration
after the first (which compiles) it sets side by side, in the trial process:

- `call`: the jitted call alone, `loop.train` and the copy of its rows to the host (the
  result's `perf/call_s`, timed by `Runner.train`);
- `runner`: all of `Runner.train` (the call, then the summary, curriculum and task hooks);
- `step`: `AjaxTrainable.step`, the Tune-facing method;
- `tune_train`: Tune's `Trainable.train` around it (result bookkeeping);
- `cycle`: from one `Trainable.train` start to the next: everything the trial waits for between
  calls, the driver's round trip through Ray included.

Overhead is each one's median less the call's, as a share of the call. The trial's RSS is read
after every step; "flat" means it stops growing after the first iteration.

    python benchmarks/tune_overhead.py            # 50 iterations of ~1 s
    python benchmarks/tune_overhead.py --quick    # 8 iterations of 32,768 env steps
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
CONFIG = HERE / "configs" / "overhead_cartpole.yaml"


def run(config: pathlib.Path, work: pathlib.Path, iterations: int, steps: int | None) -> dict:
    trace = work / "trace.jsonl"
    env = traced_env(trace, work / "cache")
    sets = [f"stop.training_iteration={iterations}"]
    if steps:
        sets += [f"trial.train.timesteps_per_iteration={steps}", f"trial.train.total_timesteps={steps * iterations}"]
    cmd = [
        *ajax_tune_command(),
        "run",
        str(config),
        "--storage-path",
        str(work / "results"),
        "--name",
        "overhead",
        "--no-plots",
        "--num-cpus",
        "2",
        *[a for s in sets for a in ("--set", s)],
    ]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError("ajax-tune run failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    files = list((work / "results" / "overhead").glob("*/result.json"))
    rows = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    pid = rows[0]["pid"]
    mine = [e for e in events if e["pid"] == pid]

    def spans(label):
        starts = [e["t"] for e in mine if e["event"] == label + ":start"]
        ends = [e for e in mine if e["event"] == label + ":end"]
        return [(s, e["t"] - s, e.get("rss")) for s, e in zip(starts, ends)]

    tune_train, steps_, runner = spans("tune_train"), spans("trial_step"), spans("runner_train")
    per_iter = []
    for i, row in enumerate(rows):
        per_iter.append(
            {
                "iteration": row["training_iteration"],
                "call_s": row["perf/call_s"],
                "runner_s": runner[i][1] if i < len(runner) else None,
                "step_s": steps_[i][1] if i < len(steps_) else None,
                "tune_train_s": tune_train[i][1] if i < len(tune_train) else None,
                "cycle_s": tune_train[i + 1][0] - tune_train[i][0] if i + 1 < len(tune_train) else None,
                "rss_mib": steps_[i][2] / 2**20 if i < len(steps_) and steps_[i][2] else None,
                "time_this_iter_s": row["time_this_iter_s"],
            }
        )
    setup_end = next((e for e in mine if e["event"] == "trial_setup:end"), {})
    return {
        "wall_s": round(time.time() - t0, 2),
        "iterations": per_iter,
        "alarms": alarms(proc.stdout + proc.stderr),
        "rss_after_setup_mib": setup_end.get("rss", 0) / 2**20,
        "env_steps_per_call": rows[0]["timesteps_this_iter"],
    }


def summarize(out: dict) -> dict:
    later = out["iterations"][1:]  # the first call compiles
    call = statistics.median(r["call_s"] for r in later)
    summary = {"iterations": len(out["iterations"]), "call_s_median": call}
    for key in ("runner_s", "step_s", "tune_train_s", "cycle_s"):
        values = [r[key] for r in later if r[key] is not None]
        if values:
            med = statistics.median(values)
            summary[key + "_median"] = med
            summary[key.replace("_s", "") + "_overhead"] = (med - call) / call
    rss = [r["rss_mib"] for r in out["iterations"] if r["rss_mib"] is not None]
    if rss:
        summary.update(
            {
                "rss_mib_first": rss[0],
                "rss_mib_last": rss[-1],
                "rss_mib_peak": max(rss),
                "rss_growth_after_first_mib": max(rss[1:], default=rss[0]) - rss[0],
                "rss_growth_second_half_mib": (rss[-1] - rss[len(rss) // 2]) if len(rss) > 2 else 0.0,
            }
        )
    return summary


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--steps", type=int, default=None, help="env steps per call (default: the config's)")
    parser.add_argument("--quick", action="store_true", help="8 iterations of 32,768 env steps")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.steps = 8, args.steps or 32768
    with tempfile.TemporaryDirectory(prefix="tune_overhead_") as tmp:
        out = run(pathlib.Path(args.config).resolve(), pathlib.Path(tmp), args.iterations, args.steps)
    summary = summarize(out)
    facts = {k: out[k] for k in ("wall_s", "env_steps_per_call", "rss_after_setup_mib", "alarms")}
    path = harness.write_results(
        "tune_overhead" + ("_quick" if args.quick else ""), {"summary": summary, "run": facts}, args.out, raw={"run": out}
    )
    for key, value in summary.items():
        print(f"{key:32s} {value:.4g}" if isinstance(value, float) else f"{key:32s} {value}")
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
