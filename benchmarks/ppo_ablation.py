"""What each of PPO's CPU changes buys: the shuffle, the dense layer's weight gradient and the
straight-line Threefry, undone one at a time and all together.

Each run is a fresh process (`peers/ppo_ablation.py`) with no persistent cache; the variants
alternate (forward, then backward, each round). A run times the training program's compilation
and the median of `--calls` calls of 16 updates (16 envs x 128 steps, 4 epochs x 4 minibatches,
the throughput benchmark's settings, with an evaluation of 8 episodes per call).

    python benchmarks/ppo_ablation.py                 # 1 and 8 seeds, 3 rounds
    python benchmarks/ppo_ablation.py --quick         # 1 seed, 1 round
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness
import ppo_throughput

from ajax_tune import threefry

VARIANTS = {
    "as shipped": [],
    "undo shuffle": ["shuffle"],
    "undo dense": ["dense"],
    "undo threefry": ["threefry"],
    "undo all three": ["shuffle", "dense", "threefry"],
}
KEYS = ("compile_s", "update_ms", "update_cpu_ms", "env_steps_per_s", "fusions")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    seeds, repeats, calls = ([1], 1, 3) if args.quick else (args.seeds, args.repeats, args.calls)
    results = []
    for num_seeds in seeds:
        runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        names = list(VARIANTS)
        for r in range(repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                undo = VARIANTS[name]
                env = {"JAX_PLATFORMS": "cpu", threefry.ROLLED_ENV: "1" if "threefry" in undo else "0"}
                settings = {**ppo_throughput.work(num_seeds, 0, runs=0), "undo": undo, "calls": calls}
                out = harness.run_worker(sys.executable, "ppo_ablation.py", settings, extra_env=env)
                runs[name].append(out)
                print(f"[{num_seeds} seed(s), {name}, {r + 1}/{repeats}] " + harness.brief(out), file=sys.stderr, flush=True)
        summary = {name: harness.medians(rs, KEYS) for name, rs in runs.items()}
        results.append({"num_seeds": num_seeds, "summary": summary, "runs": runs})
        base = summary["as shipped"]
        print(f"\n{num_seeds} seed(s): median of {repeats} processes")
        print("| variant | update (ms) | update CPU (ms) | env steps/s | against as shipped | compile (s) | fusions |")
        print("|---|---|---|---|---|---|---|")
        for name, m in summary.items():
            slower = m["update_ms"]["median"] / base["update_ms"]["median"]
            print(
                f"| {name} | {m['update_ms']['median']:.2f} | {m['update_cpu_ms']['median']:.2f} | "
                f"{m['env_steps_per_s']['median']:,.0f} | {slower:.2f}x the time | {m['compile_s']['median']:.2f} | "
                f"{statistics.median(r['fusions'] for r in runs[name]):.0f} |"
            )
    name = "ppo_ablation_quick" if args.quick else "ppo_ablation"
    harness.write_results(name, {"repeats": repeats, "calls": calls, "results": results}, args.out)


if __name__ == "__main__":
    main()
