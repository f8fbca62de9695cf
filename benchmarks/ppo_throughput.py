"""PPO throughput against Rejax on the same work, for 1 and 8 seeds.

The work (both sides): PPO on CartPole-v1, 16 envs x 128 steps, 4 epochs x 4 minibatches, tanh
64x64 policy and value networks, no observation normalisation, learning rate decayed linearly
from 2.5e-3, 491,520 env steps per seed, one evaluation (128 episodes) at the end. Each run is
a fresh process; the sides alternate; figures are medians over `--repeats` processes, each
timing `--runs` trainings from scratch after its first (compiling) call.

    python benchmarks/ppo_throughput.py              # full: ~15 min on 2 idle cores
    python benchmarks/ppo_throughput.py --quick      # smoke: a short budget, 1 repeat

Useful env steps are those a learner sees: in the `unroll_start` reset mode a finished env
stands masked until the next unroll, so its steps are stepped but not useful. Rejax's envs reset
on the next step, so all its steps are useful.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness

TARGET = 1.3  # useful env steps/s against Rejax's


def work(num_seeds: int, total_steps: int, runs: int) -> dict:
    return {
        "num_seeds": num_seeds,
        "num_envs": 16,
        "unroll_length": 128,
        "epochs": 4,
        "minibatches": 4,
        "hidden_sizes": [64, 64],
        "activation": "tanh",
        "lr": 2.5e-3,
        "lr_schedule": "linear",
        "max_grad_norm": 0.5,
        "total_steps": total_steps,
        "eval_episodes": 128,
        "runs": runs,
    }


def compare(runs: dict[str, list[dict]], ours: str = "ajax_tune", peer: str = "rejax") -> dict:
    """Medians per side, and the ratio of useful throughput taken round by round (each round
    ran both sides back to back, so the ratio cancels most of the load's drift)."""
    keys = (
        "env_steps_per_s",
        "useful_env_steps_per_s",
        "useful_env_steps_per_cpu_s",
        "compile_s",
        "compile_cpu_s",
        "run_s",
        "first_call_s",
        "eval_return",
    )
    out = {side: harness.medians(r, keys) for side, r in runs.items()}
    out["devices"] = {side: sorted({x.get("device", "?") for x in r}) for side, r in runs.items()}
    if peer in runs and runs[peer]:
        ratios = [a["useful_env_steps_per_s"] / b["useful_env_steps_per_s"] for a, b in zip(runs[ours], runs[peer])]
        cpu = [a["useful_env_steps_per_cpu_s"] / b["useful_env_steps_per_cpu_s"] for a, b in zip(runs[ours], runs[peer])]
        out["useful_ratio"] = {"median": statistics.median(ratios), "all": ratios}
        out["useful_ratio_cpu_time"] = {"median": statistics.median(cpu), "all": cpu}
        out["meets_target"] = statistics.median(ratios) >= TARGET
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3, help="processes per side (alternated)")
    parser.add_argument("--runs", type=int, default=2, help="timed trainings per process after the first")
    parser.add_argument("--total-steps", type=int, default=491_520)
    parser.add_argument("--reset-mode", default=None, help="ajax_tune's train.reset_mode (default: the loop's)")
    parser.add_argument("--peers", nargs="*", default=["rejax"], help="peers to run ('--peers' alone: none)")
    parser.add_argument("--peer-jax", default=None, help="JAX version for the peers (default: ours)")
    parser.add_argument("--peer-root", default=None, help=f"where peer venvs live (${harness.ROOT_ENV})")
    parser.add_argument(
        "--xla-flags",
        default=None,
        help="XLA_FLAGS for both sides, e.g. '--xla_cpu_multi_thread_eigen=false' to compare thread settings",
    )
    parser.add_argument("--quick", action="store_true", help="short budget, one repeat: a smoke run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.total_steps, args.repeats, args.runs = 16 * 128 * 16, 1, 1

    results = []
    for num_seeds in args.seeds:
        settings = work(num_seeds, args.total_steps, args.runs)
        ours = dict(settings, **({"reset_mode": args.reset_mode} if args.reset_mode else {}))
        sides = {"ajax_tune": (sys.executable, "ajax_tune_ppo.py", ours)}
        for peer in args.peers:
            sides[peer] = (harness.peer_python(peer, args.peer_root, args.peer_jax), f"{peer}_ppo.py", settings)
        print(f"== {num_seeds} seed(s)", flush=True)
        env = {"XLA_FLAGS": args.xla_flags} if args.xla_flags is not None else None
        runs = harness.alternate(sides, args.repeats, extra_env=env)
        results.append(
            {"num_seeds": num_seeds, "settings": settings, "xla_flags": args.xla_flags, "summary": compare(runs), "runs": runs}
        )

    path = harness.write_results(
        "ppo_throughput" + ("_quick" if args.quick else ""),
        {"results": [{k: v for k, v in r.items() if k != "runs"} for r in results]},
        args.out,
        raw={"results": results},
    )
    print(table(results))
    print(f"(written to {path})")


def table(results: list[dict]) -> str:
    return harness.side_table(
        results,
        [
            ("seeds", lambda r, side, m: str(r["num_seeds"])),
            ("side", lambda r, side, m: side),
            ("env steps/s", lambda r, side, m: f"{m['env_steps_per_s']['median']:,.0f}"),
            ("useful env steps/s", lambda r, side, m: f"{m['useful_env_steps_per_s']['median']:,.0f}"),
            ("compile (s)", lambda r, side, m: f"{m['compile_s']['median']:.1f}"),
            ("useful ratio", lambda r, side, m: harness.ratio_cell(r, side)),
        ],
    )


if __name__ == "__main__":
    main()
