"""Where the first call's compile time goes, program by program: ajax_tune's `init` and training
programs against Rejax's one program, for SAC, TD3 and DQN on the settings of
`offpolicy_throughput.py`.

`offpolicy_throughput.py` reads compile time as a first call less a later one; this splits it.
Each run is a fresh process with no persistent cache, the sides alternated (A B, B A, ...):
ours lowers, compiles and runs `init`, then lowers and compiles the training program for the
state it returned (what jit does on a first call, timed apart with `lower` and `compile`);
Rejax lowers and compiles its `train`, which initialises inside it. Both run on this
interpreter's JAX (the harness builds Rejax's venv on it) and record their versions.

    python benchmarks/compile_split.py                      # sac td3 dqn, 1 seed, 3 rounds
    python benchmarks/compile_split.py --agents sac --quick # 1 round
"""

from __future__ import annotations

import argparse
import sys

import harness
from offpolicy_throughput import AGENTS, EVAL_EPISODES, rejax_config

KEYS = (
    "init_lower_s",
    "init_compile_s",
    "init_run_s",
    "train_lower_s",
    "train_compile_s",
    "train_program_s",
    "total_s",
    "fusions",
    "instructions",
    "while_loops",
)


def table(results: list[dict]) -> str:
    lines = [
        "| agent | side | init: lower + compile + run (s) | training program: lower + compile (s) | total (s) "
        "| fusions | instructions | while loops |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for side, summary in res["summary"].items():
            med = {key: value["median"] for key, value in summary.items()}
            init = ""
            if "init_lower_s" in med:
                init = f"{med['init_lower_s']:.2f} + {med['init_compile_s']:.2f} + {med['init_run_s']:.2f}"
            lines.append(
                f"| {res['agent']} | {side} | {init} | {med['train_lower_s']:.2f} + {med['train_compile_s']:.2f} | "
                f"{med['total_s']:.2f} | {med['fusions']:.0f} | {med['instructions']:.0f} | {med['while_loops']:.0f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["sac", "td3", "dqn"], choices=sorted(AGENTS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer-jax", default=None, help="JAX version for Rejax (default: ours)")
    parser.add_argument("--peer-root", default=None)
    parser.add_argument("--quick", action="store_true", help="1 round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    rejax = harness.peer_python("rejax", args.peer_root, args.peer_jax)
    env = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    results = []
    for name in args.agents:
        spec = AGENTS[name]
        total = spec["budgets"][args.seeds]
        ours = {
            "agent": name,
            "env": spec["env"],
            "agent_config": spec["agent_config"],
            "num_seeds": args.seeds,
            "total_steps": total,
            "eval_episodes": EVAL_EPISODES,
        }
        theirs = {"algo": name, "rejax_config": rejax_config(name, spec), "num_seeds": args.seeds, "total_steps": total}
        sides = {
            "ajax_tune": (sys.executable, "ajax_tune_compile_split.py", ours),
            "rejax": (rejax, "rejax_compile_split.py", theirs),
        }
        print(f"== {name}, {args.seeds} seed(s)", file=sys.stderr, flush=True)
        runs, summary = harness.alternate_medians(sides, repeats, KEYS, extra_env=env)
        results.append({"agent": name, "num_seeds": args.seeds, "settings": ours, "summary": summary, "runs": runs})

    print(table(results))
    name = "compile_split_quick" if args.quick else "compile_split"
    harness.write_results(name, {"repeats": repeats, "results": results}, args.out)


if __name__ == "__main__":
    main()
