"""SAC on pendulum and DQN on cartpole against Rejax's SAC and DQN, on the same settings.

Same network sizes, batch size, buffer capacity, learning start, learning rate, discount,
target-update rate and update-to-data ratio on both sides (Rejax's `num_epochs` gradient steps
per step of `num_envs` envs is our `utd_ratio`). How the steps are grouped differs: Rejax
collects one step per env before its gradient steps, ours a whole unroll; the number of env
steps and of gradient steps per run is the same. One evaluation at the end; medians over
`--repeats` alternated processes, for 1 and 8 seeds.

    python benchmarks/offpolicy_throughput.py                 # both agents, 1 and 8 seeds
    python benchmarks/offpolicy_throughput.py --agents sac --quick
"""

from __future__ import annotations

import argparse
import sys

import harness
from ppo_throughput import compare

SAC = {
    "env": "pendulum", "rejax_env": "Pendulum-v1", "total_steps": 20_480,
    "agent_config": {"num_envs": 8, "unroll_length": 8, "utd_ratio": 0.5, "batch_size": 256, "capacity": 100_000,
                     "learning_starts": 1_000, "hidden_sizes": [256, 256], "activation": "relu",
                     "lr": {"kind": "constant", "peak": 1e-3}, "gamma": 0.99, "tau": 0.005},
}
DQN = {
    "env": "cartpole", "rejax_env": "CartPole-v1", "total_steps": 131_072,
    "agent_config": {"num_envs": 16, "unroll_length": 8, "utd_ratio": 0.25, "batch_size": 128, "capacity": 50_000,
                     "learning_starts": 2_000, "hidden_sizes": [64, 64], "activation": "relu",
                     "lr": {"kind": "constant", "peak": 1e-3}, "gamma": 0.99, "tau": 0.005,
                     "epsilon_start": 1.0, "epsilon_end": 0.05, "epsilon_decay_fraction": 0.25},
}
AGENTS = {"sac": SAC, "dqn": DQN}


def rejax_config(name: str, spec: dict) -> dict:
    """The same settings in Rejax's keys."""
    a = spec["agent_config"]
    epochs = a["utd_ratio"] * a["num_envs"]
    if epochs != int(epochs):
        raise ValueError(f"{name}: utd_ratio * num_envs must be whole for Rejax's num_epochs, got {epochs}")
    common = {
        "env": spec["rejax_env"], "num_envs": a["num_envs"], "num_epochs": int(epochs), "batch_size": a["batch_size"],
        "buffer_size": a["capacity"], "fill_buffer": a["learning_starts"], "learning_rate": a["lr"]["peak"],
        "gamma": a["gamma"], "polyak": 1.0 - a["tau"], "agent_kwargs": {"activation": a["activation"]},
    }
    if name == "sac":
        return {**common, "hidden_layer_sizes": list(a["hidden_sizes"])}
    # Rejax's DQN builds a 64x64 Q-network whatever it is told; ours is set to match.
    return {**common, "eps_start": a["epsilon_start"], "eps_end": a["epsilon_end"],
            "exploration_fraction": a["epsilon_decay_fraction"], "ddqn": True}


def available_agents() -> set[str]:
    from ajax_tune.agents import AGENTS as registered

    return set(registered)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["sac", "dqn"], choices=sorted(AGENTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--peers", nargs="*", default=["rejax"])
    parser.add_argument("--peer-root", default=None)
    parser.add_argument("--quick", action="store_true", help="short budgets, one repeat: a smoke run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.runs = 1, 1

    missing = [a for a in args.agents if a not in available_agents()]
    if missing:
        sys.exit(f"agent(s) {missing} are not in this checkout's ajax_tune.agents.AGENTS")
    results = []
    for name in args.agents:
        spec = AGENTS[name]
        total = spec["total_steps"] // (8 if args.quick else 1)
        for num_seeds in args.seeds:
            ours = {"agent": name, "env": spec["env"], "agent_config": spec["agent_config"], "num_seeds": num_seeds,
                    "total_steps": total, "runs": args.runs}
            sides = {"ajax_tune": (sys.executable, "ajax_tune_offpolicy.py", ours)}
            for peer in args.peers:
                peer_settings = {"algo": name, "rejax_config": rejax_config(name, spec), "num_seeds": num_seeds,
                                 "total_steps": total, "runs": args.runs}
                sides[peer] = (harness.peer_python(peer, args.peer_root), f"{peer}_offpolicy.py", peer_settings)
            print(f"== {name}, {num_seeds} seed(s)", flush=True)
            runs = harness.alternate(sides, args.repeats)
            results.append({"agent": name, "num_seeds": num_seeds, "settings": ours, "summary": compare(runs),
                            "runs": runs})

    path = harness.write_results("offpolicy_throughput" + ("_quick" if args.quick else ""), {"results": results}, args.out)
    print(table(results))
    print(f"(written to {path})")


def table(results: list[dict]) -> str:
    lines = ["| agent | seeds | side | env steps/s | compile (s) | ratio |", "|---|---|---|---|---|---|"]
    for res in results:
        summary = res["summary"]
        for side, s in summary.items():
            if not isinstance(s, dict) or "env_steps_per_s" not in s:
                continue
            ratio = f"{summary['useful_ratio']['median']:.2f}x" if side == "ajax_tune" and "useful_ratio" in summary else ""
            lines.append(f"| {res['agent']} | {res['num_seeds']} | {side} | {s['env_steps_per_s']['median']:,.0f} | "
                         f"{s['compile_s']['median']:.1f} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
