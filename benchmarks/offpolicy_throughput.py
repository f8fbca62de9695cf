"""SAC and TD3 on pendulum and DQN on cartpole against Rejax's SAC, TD3 and DQN, on the same settings.

Same network sizes, batch size, buffer capacity, learning start, learning rate, discount,
target-update rate and update-to-data ratio on both sides (Rejax's `num_epochs` gradient steps
per step of `num_envs` envs is our `utd_ratio`). How the steps are grouped differs: Rejax
collects one step per env before its gradient steps, ours a whole unroll; the number of env
steps and of gradient steps per run is the same. One evaluation of 128 episodes at the end (Rejax's
fixed count; ours is set to match); medians over `--repeats` alternated processes, for 1 and 8
seeds. The budget per seed is smaller at 8 seeds (each agent's `budgets`) so that the whole run
fits in under an hour on two CPU cores; steps per second count every env step, warm-up included.

Rejax runs several seeds as it documents, `jax.vmap` over its `train`.

A probe in Rejax's interpreter then times one minibatch draw of each kind on the buffer sizes used
here: Rejax draws without replacement, we (flashbax) draw uniformly with replacement.

    python benchmarks/offpolicy_throughput.py                 # both agents, 1 and 8 seeds
    python benchmarks/offpolicy_throughput.py --agents sac --quick
"""

from __future__ import annotations

import argparse
import sys

import harness
from ppo_throughput import compare

SAC = {
    "env": "pendulum",
    "rejax_env": "Pendulum-v1",
    "budgets": {1: 4_096, 8: 1_024},
    "agent_config": {
        "num_envs": 8,
        "unroll_length": 8,
        "utd_ratio": 0.5,
        "batch_size": 256,
        "capacity": 100_000,
        "learning_starts": 256,
        "hidden_sizes": [256, 256],
        "activation": "relu",
        "lr": {"kind": "constant", "peak": 1e-3},
        "gamma": 0.99,
        "tau": 0.005,
    },
}
DQN = {
    "env": "cartpole",
    "rejax_env": "CartPole-v1",
    "budgets": {1: 16_384, 8: 4_096},
    "agent_config": {
        "num_envs": 16,
        "unroll_length": 8,
        "utd_ratio": 0.25,
        "batch_size": 128,
        "capacity": 50_000,
        "learning_starts": 512,
        "hidden_sizes": [64, 64],
        "activation": "relu",
        "lr": {"kind": "constant", "peak": 1e-3},
        "gamma": 0.99,
        "tau": 0.005,
        "epsilon_start": 1.0,
        "epsilon_end": 0.05,
        "epsilon_decay_fraction": 0.25,
    },
}
# Rejax's TD3 builds 64x64 actor and critic networks whatever it is told; ours are set to match.
# Its actor (and the targets) step once per `policy_delay` env steps, with `num_epochs` updates:
# one actor update per `policy_delay` critic updates, as ours.
TD3 = {
    **SAC,
    "action_half_range": 2.0,  # Rejax's noises are in the env's units (torque in [-2, 2]); ours in [-1, 1]
    "agent_config": {
        **SAC["agent_config"],
        "hidden_sizes": [64, 64],
        "policy_delay": 2,
        "exploration_noise": 0.1,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
    },
}
AGENTS = {"sac": SAC, "td3": TD3, "dqn": DQN}
EVAL_EPISODES = 128


def budget(spec: dict, num_seeds: int, quick: bool) -> int:
    """Env steps per seed for a run of `num_seeds` seeds."""
    budgets = spec["budgets"]
    if num_seeds not in budgets:
        raise SystemExit(f'no budget for {num_seeds} seeds in {sorted(budgets)}; add one to the agent\'s "budgets"')
    total = budgets[num_seeds]
    if quick:  # just past the warm-up, so that a smoke run still takes gradient steps
        a = spec["agent_config"]
        total = a["learning_starts"] + 4 * a["num_envs"] * a["unroll_length"]
    return total


def rejax_config(name: str, spec: dict) -> dict:
    """The same settings in Rejax's keys."""
    a = spec["agent_config"]
    epochs = a["utd_ratio"] * a["num_envs"]
    if epochs != int(epochs):
        raise ValueError(f"{name}: utd_ratio * num_envs must be whole for Rejax's num_epochs, got {epochs}")
    common = {
        "env": spec["rejax_env"],
        "num_envs": a["num_envs"],
        "num_epochs": int(epochs),
        "batch_size": a["batch_size"],
        "buffer_size": a["capacity"],
        "fill_buffer": a["learning_starts"],
        "learning_rate": a["lr"]["peak"],
        "gamma": a["gamma"],
        "polyak": 1.0 - a["tau"],
        "agent_kwargs": {"activation": a["activation"]},
    }
    if name == "sac":
        return {**common, "hidden_layer_sizes": list(a["hidden_sizes"])}
    if name == "td3":
        del common["agent_kwargs"]
        kwargs = {"activation": a["activation"]}
        return {
            **common,
            "actor_kwargs": kwargs,
            "critic_kwargs": dict(kwargs),
            "policy_delay": a["policy_delay"],
            **{k: a[k] * spec["action_half_range"] for k in ("exploration_noise", "target_noise", "target_noise_clip")},
        }
    # Rejax's DQN builds a 64x64 Q-network whatever it is told; ours is set to match.
    return {
        **common,
        "eps_start": a["epsilon_start"],
        "eps_end": a["epsilon_end"],
        "exploration_fraction": a["epsilon_decay_fraction"],
        "ddqn": True,
    }


def available_agents() -> set[str]:
    from ajax_tune.agents import AGENTS as registered

    return set(registered)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["sac", "td3", "dqn"], choices=sorted(AGENTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1, help="timed trainings per process after the first")
    parser.add_argument("--peers", nargs="*", default=["rejax"])
    parser.add_argument("--peer-jax", default=None, help="JAX version for the peers (default: ours)")
    parser.add_argument("--peer-root", default=None)
    parser.add_argument("--quick", action="store_true", help="short budgets, one repeat: a smoke run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.runs = 1, 1

    missing = [a for a in args.agents if a not in available_agents()]
    if missing:
        sys.exit(f"agent(s) {missing} are not in this checkout's ajax_tune.agents.AGENTS")
    for name in args.agents:  # every budget before any run, so that a bad --seeds loses nothing
        for num_seeds in args.seeds:
            budget(AGENTS[name], num_seeds, args.quick)
    results = []
    for name in args.agents:
        spec = AGENTS[name]
        for num_seeds in args.seeds:
            total = budget(spec, num_seeds, args.quick)
            ours = {
                "agent": name,
                "env": spec["env"],
                "agent_config": spec["agent_config"],
                "num_seeds": num_seeds,
                "total_steps": total,
                "runs": args.runs,
                "eval_episodes": EVAL_EPISODES,
            }
            sides = {"ajax_tune": (sys.executable, "ajax_tune_offpolicy.py", ours)}
            for peer in args.peers:
                peer_settings = {
                    "algo": name,
                    "rejax_config": rejax_config(name, spec),
                    "num_seeds": num_seeds,
                    "total_steps": total,
                    "runs": args.runs,
                }
                sides[peer] = (harness.peer_python(peer, args.peer_root, args.peer_jax), f"{peer}_offpolicy.py", peer_settings)
            print(f"== {name}, {num_seeds} seed(s)", flush=True)
            runs = harness.alternate(sides, args.repeats)
            results.append(
                {
                    "agent": name,
                    "num_seeds": num_seeds,
                    "settings": ours,
                    "summary": compare(runs),
                    "warmup_share": spec["agent_config"]["learning_starts"] / total,
                    "runs": runs,
                }
            )

    probe = sampling_probe(args.peers, args.peer_root, args.agents, args.quick, args.peer_jax)
    path = harness.write_results(
        "offpolicy_throughput" + ("_quick" if args.quick else ""),
        {"results": [{k: v for k, v in r.items() if k != "runs"} for r in results], "sampling_probe": probe},
        args.out,
        raw={"results": results},
    )
    print(table(results))
    for row in probe:
        print(
            f"minibatch draw, capacity {row['capacity']:,}, batch {row['batch']}: "
            f"without replacement {row['without_replacement_ms']:.2f} ms, uniform {row['uniform_ms']:.2f} ms"
        )
    print(f"(written to {path})")


def sampling_probe(peers: list[str], peer_root, agents: list[str], quick: bool, peer_jax=None) -> list[dict]:
    """Time one minibatch draw of each kind in Rejax's interpreter, for the buffers used here."""
    if "rejax" not in peers:
        return []
    shapes = [
        {"capacity": AGENTS[a]["agent_config"]["capacity"], "batch": AGENTS[a]["agent_config"]["batch_size"]} for a in agents
    ]
    out = harness.run_worker(
        harness.peer_python("rejax", peer_root, peer_jax), "rejax_sampling.py", {"shapes": shapes, "draws": 10 if quick else 100}
    )
    return out["draws"]


def table(results: list[dict]) -> str:
    return harness.side_table(
        results,
        [
            ("agent", lambda r, side, m: r["agent"]),
            ("seeds", lambda r, side, m: str(r["num_seeds"])),
            ("steps per seed", lambda r, side, m: f"{r['settings']['total_steps']:,}"),
            ("warm-up", lambda r, side, m: f"{r['warmup_share']:.0%}"),
            ("side", lambda r, side, m: side),
            ("env steps/s", lambda r, side, m: f"{m['env_steps_per_s']['median']:,.0f}"),
            ("compile (s)", lambda r, side, m: f"{m['compile_s']['median']:.1f}"),
            ("ratio", lambda r, side, m: harness.ratio_cell(r, side)),
        ],
    )


if __name__ == "__main__":
    main()
