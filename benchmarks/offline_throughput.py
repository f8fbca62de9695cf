"""Gradient updates per second of the offline agents (TD3+BC and IQL) for 1 and 8 seeds.

Each configuration is one runner on a pendulum dataset of random rows (`--rows`), with the
agents' default networks (256x256) and batch (256); a first call compiles, then `--repeats`
calls of `--updates` gradient updates per seed are timed, configurations taking turns call by
call. Each call ends with one evaluation episode (200 env steps per seed), included in the
time. Reported: the median over calls of updates per second summed over seeds, and per seed.

    python benchmarks/offline_throughput.py                  # both agents, 1 and 8 seeds
    python benchmarks/offline_throughput.py --quick
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import harness

AGENTS = ("td3bc", "iql")


def dataset(rows: int, directory: pathlib.Path) -> str:
    from ajax_tune import datasets
    from ajax_tune.envs import EpisodeWrapper, make_env

    data = datasets.collect(EpisodeWrapper(make_env("pendulum")), rows, env_config={"name": "pendulum", "kwargs": {}})
    return str(data.save(directory / "pendulum"))


def runner(agent: str, seeds: int, updates: int, path: str):
    from ajax_tune.runner import Runner

    return Runner(
        {
            "env": {"name": "pendulum"},
            "agent": {"name": agent},
            "train": {
                "dataset": path,
                "total_timesteps": 10**9,
                "timesteps_per_iteration": updates,
                "num_seeds": seeds,
                "eval_episodes": 1,
            },
        }
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--updates", type=int, default=2_000, help="gradient updates per seed per timed call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=20_000, help="dataset rows")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 updates, 1 repeat, 2,000 rows")
    parser.add_argument("--out", help="result JSON (default: benchmarks/results/offline_throughput[_quick].json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.updates, args.repeats, args.rows = 200, 1, 2_000
    with tempfile.TemporaryDirectory() as tmp:
        path = dataset(args.rows, pathlib.Path(tmp))
        runners, compile_s = {}, {}
        for agent in args.agents:
            for seeds in args.seeds:
                start = time.perf_counter()
                runners[agent, seeds] = r = runner(agent, seeds, args.updates, path)
                r.train()  # compiles
                compile_s[agent, seeds] = time.perf_counter() - start
                print(f"{agent} x{seeds}: built and compiled in {compile_s[agent, seeds]:.1f} s", file=sys.stderr)
        times = {key: [] for key in runners}
        for _ in range(args.repeats):
            for key, r in runners.items():
                result = r.train()
                times[key].append(result["perf/call_s"])
                assert result["perf/compilations"] == 1, key
    results = []
    for (agent, seeds), calls in times.items():
        median = statistics.median(calls)
        row = {
            "agent": agent,
            "seeds": seeds,
            "updates_per_call": args.updates,
            "call_s": calls,
            "updates_per_s": args.updates * seeds / median,
            "updates_per_s_per_seed": args.updates / median,
            "first_call_s": compile_s[agent, seeds],
        }
        results.append(row)
        print(f"{agent:6s} seeds {seeds}: {row['updates_per_s']:9.0f} updates/s ({row['updates_per_s_per_seed']:.0f} per seed)")
    name = "offline_throughput_quick" if args.quick else "offline_throughput"
    harness.write_results(name, {"rows": args.rows, "repeats": args.repeats, "results": results}, args.out)


if __name__ == "__main__":
    main()
