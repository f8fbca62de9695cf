"""Throughput against the number of seeds in one trial: PPO on cartpole, 1, 4, 16 and 64 seeds.

The seeds are vmapped inside one compiled program, so more seeds means larger batches for the
same number of sequential steps. Each count runs in fresh processes (`--repeats`, medians);
the work per seed is the PPO benchmark's settings on a shorter budget.

    python benchmarks/scale.py
    python benchmarks/scale.py --seeds 1 4 --quick
"""

from __future__ import annotations

import argparse
import sys

import harness
import ppo_throughput


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--total-steps", type=int, default=16 * 128 * 24, help="env steps per seed per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--reset-mode", default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.total_steps, args.repeats, args.runs = 16 * 128 * 8, 1, 1

    results = []
    for r in range(args.repeats):
        order = args.seeds if r % 2 == 0 else args.seeds[::-1]
        for num_seeds in order:
            settings = dict(ppo_throughput.work(num_seeds, args.total_steps, args.runs), eval_episodes=8)
            if args.reset_mode:
                settings["reset_mode"] = args.reset_mode
            out = harness.run_worker(sys.executable, "ajax_tune_ppo.py", settings)
            out["num_seeds"] = num_seeds
            results.append(out)
            print(f"[{num_seeds} seeds, {r + 1}/{args.repeats}] " + harness.brief(out), flush=True)

    summary = []
    for num_seeds in args.seeds:
        runs = [x for x in results if x["num_seeds"] == num_seeds]
        med = harness.medians(runs, ("env_steps_per_s", "useful_env_steps_per_s", "compile_s", "run_s"))
        summary.append({"num_seeds": num_seeds, **med, "device": runs[0]["device"]})
    path = harness.write_results(
        "scale" + ("_quick" if args.quick else ""),
        {"total_steps_per_seed": args.total_steps, "summary": summary, "runs": results},
        args.out,
    )
    lines = ["| seeds | env steps/s (all seeds) | per seed | compile (s) |", "|---|---|---|---|"]
    for s in summary:
        rate = s["env_steps_per_s"]["median"]
        lines.append(f"| {s['num_seeds']} | {rate:,.0f} | {rate / s['num_seeds']:,.0f} | {s['compile_s']['median']:.1f} |")
    print("\n".join(lines))
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
