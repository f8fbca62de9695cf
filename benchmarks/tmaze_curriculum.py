"""T-maze: a ThresholdCurriculum over the corridor's length against direct training on it.

Recurrent PPO (a GRU of 32, 32 envs x 64 steps, 2 minibatches x 4 epochs) on a T-maze of length
`--target`, 4 seeds as lanes of one trial, the same budget for both arms. `direct` trains on the
target length from the start; `curriculum` starts at length 2 and walks up (2, 4, 6, ... up to
the target) each time the seeds' mean success passes 0.9. Both evaluate the target length after
every call (a held-out task), so the two arms are read on the same task. Arms alternate, one
process each; the processes share a fresh compilation cache (both arms run one program: the
task is data), so one compiles.

    python benchmarks/tmaze_curriculum.py                 # target 16, seeds 0 to 3, 98,304 steps
    python benchmarks/tmaze_curriculum.py --quick         # smoke: target 6, one seed, 2 calls
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import harness

CALL = 32_768  # env steps per seed per call
ARMS = ("curriculum", "direct")


def trial_config(arm: str, target: int, budget: int, seed: int) -> dict:
    levels = [length for length in range(2, target + 1, 2)] or [target]
    config = {
        "env": {"name": "tmaze", "kwargs": {"max_length": target}, "task": {"length": target if arm == "direct" else levels[0]}},
        "agent": {
            "num_envs": 32,
            "unroll_length": 64,
            "num_minibatches": 2,
            "update_epochs": 4,
            "hidden_sizes": [64],
            "lr": {"kind": "constant", "peak": 1e-3},
            "recurrent": {"cell": "gru", "size": 32},
        },
        "train": {"total_timesteps": budget, "timesteps_per_iteration": CALL, "num_seeds": 4, "eval_episodes": 16, "seed": seed},
        "heldout": {"tasks": [{"length": target}]},
    }
    if arm == "curriculum":
        config["callbacks"] = [
            {"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": {"length": levels}, "threshold": 0.9}}
        ]
    return config


def worker(settings: dict) -> dict:
    from ajax_tune.runner import Runner

    runner = Runner(trial_config(**settings))
    start, curve = time.perf_counter(), []
    while runner.loop.timestep(runner.state) < settings["budget"]:
        result = runner.train()
        curve.append(
            {
                "env_steps": int(result["timestep"]),
                "length": result["curriculum/task/length"],
                "target_success": result["eval/heldout/0/success_rate"],
            }
        )
    solved = [c["env_steps"] for c in curve if c["target_success"] >= 0.9]
    return {
        **settings,
        "curve": curve,
        "best_target_success": max(c["target_success"] for c in curve),
        "first_steps_at_0_9": solved[0] if solved else None,
        "wall_s": time.perf_counter() - start,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--budget", type=int, default=3 * CALL, help="env steps per seed, both arms")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    if args.quick:
        args.target, args.seeds, args.budget = 6, [0], 2 * CALL
    runs = []
    env = {**harness.worker_env(), "JAX_COMPILATION_CACHE_DIR": tempfile.mkdtemp(prefix="tmaze_cache_")}
    env.pop("AJAX_TUNE_COMPILATION_CACHE", None)
    for i, seed in enumerate(args.seeds):
        for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
            settings = {"arm": arm, "target": args.target, "budget": args.budget, "seed": seed}
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(settings)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError("worker failed:\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-25:]))
            out = json.loads(lines[-1][len("RESULT ") :])
            runs.append(out)
            print(
                f"[{arm} seed {seed}] best success on length {args.target}: {out['best_target_success']:.3f}"
                f" (0.9 first at {out['first_steps_at_0_9']} env steps; {out['wall_s']:.0f} s)",
                flush=True,
            )
    name = "tmaze_curriculum_quick" if args.quick else "tmaze_curriculum"
    harness.write_results(name, {"target": args.target, "budget": args.budget, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
