"""PBT over learning-rate schedules, run several times as the README says, so that its outcome
is quoted as a median and a range rather than from one lucky run.

Each run is `ajax-tune run configs/pbt_lr_schedule.yaml` in a fresh process (its own Ray, the
compilation cache as the user's would be: warm after the first run). From each experiment
directory it reads, per run: the best evaluation return any trial reported at any iteration,
the best trial's return at its last iteration, the score of the best checkpoint kept, the
number of exploits (PBT's own log, `pbt_global.txt`), the largest `perf/compilations` reported
(1 means no trial recompiled), and the wall time of the command.

    python benchmarks/pbt_outcomes.py              # 5 runs
    python benchmarks/pbt_outcomes.py --runs 2     # a quicker look
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import harness

ROOT = harness.HERE.parent
CONFIG = ROOT / "configs" / "pbt_lr_schedule.yaml"
METRIC = "eval/return_mean"


def read_run(experiment: pathlib.Path) -> dict:
    best_any, last_best, compilations, trials = -float("inf"), -float("inf"), 0.0, 0
    for result_file in experiment.glob("*/result.json"):
        rows = [json.loads(line) for line in result_file.read_text().splitlines() if line.strip()]
        if not rows:
            continue
        trials += 1
        scores = [r[METRIC] for r in rows if isinstance(r.get(METRIC), (int, float))]
        best_any = max([best_any, *scores])
        last_best = max(last_best, scores[-1] if scores else -float("inf"))
        compilations = max([compilations, *(r.get("perf/compilations", 0.0) for r in rows)])
    kept = []
    for meta in experiment.glob("*/checkpoint_*/ajax_tune.json"):
        result = json.loads(meta.read_text()).get("extra", {}).get("result", {})
        if isinstance(result.get(METRIC), (int, float)):
            kept.append(result[METRIC])
    log = experiment / "pbt_global.txt"
    exploits = sum(1 for line in log.read_text().splitlines() if line.strip()) if log.exists() else 0
    return {
        "trials": trials,
        "best_return_any_iteration": best_any,
        "best_return_at_last_iteration": last_best,
        "best_kept_checkpoint_return": max(kept) if kept else None,
        "exploits": exploits,
        "max_compilations_per_actor": compilations,
    }


def summary(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else {}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="pbt_outcomes_") as storage:
        for i in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ajax_tune.cli.commands",
                    "run",
                    str(CONFIG),
                    "--name",
                    f"pbt_{i}",
                    "--storage-path",
                    storage,
                    "--no-plots",
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env=harness.worker_env(),
            )
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise RuntimeError(f"run {i} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            run = {"wall_s": round(wall, 1), **read_run(pathlib.Path(storage) / f"pbt_{i}")}
            runs.append(run)
            print(f"[run {i + 1}/{args.runs}] " + ", ".join(f"{k} {v}" for k, v in run.items()), flush=True)
    payload = {
        "config": str(CONFIG.relative_to(ROOT)),
        "runs": runs,
        "summary": {
            key: summary([r[key] for r in runs])
            for key in (
                "best_return_any_iteration",
                "best_return_at_last_iteration",
                "best_kept_checkpoint_return",
                "exploits",
                "max_compilations_per_actor",
                "wall_s",
            )
        },
    }
    path = harness.write_results("pbt_outcomes", payload, args.out)
    print(json.dumps(payload["summary"], indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
