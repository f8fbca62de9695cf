"""The two reset modes side by side: time to solve and useful env steps per second.

`next_step` starts a finished env's next episode on the very next step; `unroll_start` leaves
it frozen (its steps masked) until the next unroll begins. For cartpole, pendulum and the
corridor, PPO trains one trial of `--seeds` seeds in each mode on the same budget, evaluating
after every call, until the seeds' mean evaluation reaches the env's threshold. Modes alternate
process by process.

    python benchmarks/reset_modes.py                      # all three envs, 4 seeds, 2 repeats
    python benchmarks/reset_modes.py --envs cartpole --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness

MODES = ("next_step", "unroll_start")

# PPO settings known to learn each env; the threshold is on the seeds' mean evaluation.
ENVS = {
    "cartpole": {
        "config": {
            "env": {"name": "cartpole"},
            "agent": {
                "name": "ppo",
                "num_envs": 16,
                "unroll_length": 128,
                "num_minibatches": 4,
                "update_epochs": 4,
                "lr": {"kind": "linear", "peak": 2.5e-3},
                "ent_coef": 0.0,
            },
            "train": {"total_timesteps": 491_520, "timesteps_per_iteration": 16 * 128 * 4, "eval_episodes": 8},
        },
        "metric": "eval/return",
        "threshold": 475.0,
    },
    "pendulum": {
        "config": {
            "env": {"name": "pendulum"},
            "agent": {
                "name": "ppo",
                "num_envs": 16,
                "unroll_length": 128,
                "num_minibatches": 8,
                "update_epochs": 10,
                "lr": {"kind": "linear", "peak": 1e-3},
                "ent_coef": 0.0,
                "gamma": 0.95,
                "normalize_rewards": True,
            },
            "train": {"total_timesteps": 16 * 128 * 8 * 60, "timesteps_per_iteration": 16 * 128 * 8, "eval_episodes": 8},
        },
        "metric": "eval/return",
        "threshold": -300.0,
    },
    "corridor": {
        "config": {
            "env": {"name": "corridor", "kwargs": {"max_length": 16, "max_episode_steps": 40}, "task": {"length": 6}},
            "agent": {
                "name": "ppo",
                "num_envs": 8,
                "unroll_length": 16,
                "num_minibatches": 2,
                "update_epochs": 2,
                "hidden_sizes": [32, 32],
                "lr": {"kind": "constant", "peak": 3e-3},
            },
            "train": {"total_timesteps": 8 * 16 * 8 * 60, "timesteps_per_iteration": 8 * 16 * 8, "eval_episodes": 8},
        },
        "metric": "eval/success",
        "threshold": 0.95,
    },
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", type=int, default=4, help="seeds per trial (vmapped)")
    parser.add_argument("--repeats", type=int, default=2, help="trials per mode, each with another seed")
    parser.add_argument("--quick", action="store_true", help="cartpole-sized smoke: one repeat, 2 seeds")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.seeds = 1, 2

    results = []
    for name in args.envs:
        spec = ENVS[name]
        runs = {mode: [] for mode in MODES}
        for r in range(args.repeats):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                config = {
                    **spec["config"],
                    "train": {**spec["config"]["train"], "num_seeds": args.seeds, "reset_mode": mode, "seed": r},
                }
                settings = {"config": config, "metric": spec["metric"], "threshold": spec["threshold"]}
                out = harness.run_worker(sys.executable, "ajax_tune_solve.py", settings)
                runs[mode].append(out)
                solved = out["solved"]
                wall = f" / {solved['wall_s']:.1f} s" if solved else ""
                print(
                    f"[{name} {mode} {r + 1}/{args.repeats}] solved at "
                    f"{solved['env_steps'] if solved else 'never'} env steps{wall}, "
                    f"useful {out['useful_env_steps_per_s']:,.0f}/s ({out['useful_fraction']:.0%} of stepped)",
                    flush=True,
                )
        results.append(
            {
                "env": name,
                "metric": spec["metric"],
                "threshold": spec["threshold"],
                "num_seeds": args.seeds,
                "summary": {mode: summarize(r) for mode, r in runs.items()},
                "runs": runs,
            }
        )

    path = harness.write_results("reset_modes" + ("_quick" if args.quick else ""), {"results": results}, args.out)
    print(table(results))
    print(f"(written to {path})")


def summarize(runs: list[dict]) -> dict:
    solved = [r["solved"] for r in runs]
    steps = [s["env_steps"] for s in solved if s]
    walls = [s["wall_s"] for s in solved if s]
    return {
        "solved": f"{len(steps)}/{len(runs)}",
        "env_steps_to_solve_median": statistics.median(steps) if steps else None,
        "wall_s_to_solve_median": statistics.median(walls) if walls else None,
        "useful_env_steps_per_s_median": statistics.median(r["useful_env_steps_per_s"] for r in runs),
        "env_steps_per_s_median": statistics.median(r["env_steps_per_s"] for r in runs),
        "useful_fraction_median": statistics.median(r["useful_fraction"] for r in runs),
    }


def table(results: list[dict]) -> str:
    lines = [
        "| env | mode | solved | env steps to solve | wall s to solve | useful env steps/s | useful share |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for mode, s in res["summary"].items():
            steps = f"{s['env_steps_to_solve_median']:,.0f}" if s["env_steps_to_solve_median"] else "-"
            wall = f"{s['wall_s_to_solve_median']:.1f}" if s["wall_s_to_solve_median"] else "-"
            lines.append(
                f"| {res['env']} | {mode} | {s['solved']} | {steps} | {wall} | "
                f"{s['useful_env_steps_per_s_median']:,.0f} | {s['useful_fraction_median']:.0%} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
