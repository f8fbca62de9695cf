"""A loop's initialisation program compiled with few XLA passes against every pass.

`init` runs once per state, in milliseconds, yet fully optimised its program compiles for longer
than some trials' first iteration takes. The loop compiles it with `ONCE_COMPILER_OPTIONS`
(`ajax_tune/loop.py`). Each run is a fresh process (`peers/init_compile.py`) with an empty
in-memory cache and no persistent cache, alternating the two sides (A B, B A, ...) per agent's
default config; a state's float leaves are summed to show what the two programs compute.

    python benchmarks/init_compile.py                # ppo, sac, dqn; 3 rounds
    python benchmarks/init_compile.py --quick        # ppo; 1 round
"""

from __future__ import annotations

import argparse
import sys

import harness

KEYS = ("lower_s", "compile_s", "run_s")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["ppo", "sac", "dqn"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-seeds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="ppo, 1 round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    agents, repeats = (["ppo"], 1) if args.quick else (args.agents, args.repeats)
    env = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    results = []
    print(f"{'agent':6s} {'side':6s} {'compile s (median)':>19s} {'lower s':>8s} {'run s':>7s}  float leaves' |sum|")
    for agent in agents:
        sides = {
            side: (sys.executable, "init_compile.py", {"side": side, "agent": agent, "num_seeds": args.num_seeds})
            for side in ("once", "default")
        }
        runs, summary = harness.alternate_medians(sides, repeats, KEYS, extra_env=env)
        for side, r in runs.items():
            m = summary[side]
            digests = sorted({x["float_leaf_abs_sum"] for x in r})
            cells = f"{m['compile_s']['median']:19.2f} {m['lower_s']['median']:8.2f} {m['run_s']['median']:7.3f}"
            print(f"{agent:6s} {side:6s} {cells}  {digests}")
        ratio = summary["default"]["compile_s"]["median"] / summary["once"]["compile_s"]["median"]
        results.append({"agent": agent, "summary": summary, "default_over_once": ratio, "runs": runs})
    name = "init_compile_quick" if args.quick else "init_compile"
    harness.write_results(name, {"repeats": repeats, "num_seeds": args.num_seeds, "results": results}, args.out)


if __name__ == "__main__":
    main()
