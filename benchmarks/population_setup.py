"""A population's traced settings put on its lanes: as shipped against the earlier ways.

`TrainLoop.set_hparams` with one config per member runs once when a population trial starts
(and again after a PBT exploit or a `reconfigure`). It first sliced every leaf of the agent's
state per member and joined them again (`slice_and_join`); then it applied each config to all
lanes on the device and assembled only the leaves that changed (`all_lanes`); it now makes each
lane's settings on the host and places only the leaves that changed (`shipped`). Each run is a
fresh process (`peers/population_setup.py`; its small programs compile there for the first time,
as in a new trial), the sides alternated, 8 members x 2 seeds per agent's default config, no
persistent cache.

    python benchmarks/population_setup.py            # ppo, sac, dqn; 3 rounds
    python benchmarks/population_setup.py --quick    # ppo; 1 round
"""

from __future__ import annotations

import argparse
import sys

import harness

KEYS = ("first_s", "again_s")
SIDES = ("shipped", "all_lanes", "slice_and_join")
ENVS = {"ppo": "cartpole", "sac": "pendulum", "dqn": "cartpole"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["ppo", "sac", "dqn"], choices=sorted(ENVS))
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--num-seeds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="ppo, 1 round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    agents, repeats = (["ppo"], 1) if args.quick else (args.agents, args.repeats)
    env = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    results = []
    print(f"{'agent':6s} {'side':15s} {'first s (median)':>17s} {'again s':>8s}  float leaves' |sum|")
    for agent in agents:
        settings = {"agent": agent, "env": ENVS[agent], "members": args.members, "num_seeds": args.num_seeds}
        sides = {side: (sys.executable, "population_setup.py", {**settings, "side": side}) for side in SIDES}
        runs, summary = harness.alternate_medians(sides, repeats, KEYS, extra_env=env)
        for side, r in runs.items():
            m = summary[side]
            digests = sorted({x["float_leaf_abs_sum"] for x in r})
            print(f"{agent:6s} {side:15s} {m['first_s']['median']:17.3f} {m['again_s']['median']:8.4f}  {digests}")
        shipped = summary["shipped"]["first_s"]["median"]
        ratios = {f"{side}_over_shipped": summary[side]["first_s"]["median"] / shipped for side in SIDES[1:]}
        results.append({"agent": agent, "settings": settings, "summary": summary, **ratios, "runs": runs})
    name = "population_setup_quick" if args.quick else "population_setup"
    harness.write_results(name, {"repeats": repeats, "results": results}, args.out)


if __name__ == "__main__":
    main()
