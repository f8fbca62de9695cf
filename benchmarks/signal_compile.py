"""What SAC's learning signal costs its training program's compilation.

SAC reports, every update, the mean TD error of each env's fresh transitions: the signal that
`PrioritizedLevelReplay` scores levels by, and that nothing else reads. Each run is a fresh
process (`peers/signal_compile.py`) with no persistent cache, the two sides alternated (A B,
B A, ...): the program with the signal (as a run under PLR builds it) and without it (as a
run without a sampler, or under one that does not read it, builds it).

    python benchmarks/signal_compile.py              # 6 rounds
    python benchmarks/signal_compile.py --quick      # 1 round
"""

from __future__ import annotations

import argparse
import sys

import harness
from offpolicy_throughput import SAC

KEYS = ("lower_s", "compile_s", "compile_cpu_s", "fusions", "instructions")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="1 round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    settings = {"agent_config": SAC["agent_config"], "total_steps": SAC["budgets"][1]}
    sides = {
        side: (sys.executable, "signal_compile.py", {**settings, "side": side}) for side in ("with_signal", "without_signal")
    }
    env = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    runs, summary = harness.alternate_medians(sides, repeats, KEYS, extra_env=env)
    print(
        f"{'side':15s} {'compile s':>10s} {'compile CPU s':>14s} {'lower s':>8s} {'fusions':>8s} {'instructions':>13s}  (medians)"
    )
    for side in sides:
        m = summary[side]
        print(
            f"{side:15s} {m['compile_s']['median']:10.2f} {m['compile_cpu_s']['median']:14.2f} {m['lower_s']['median']:8.2f} "
            f"{m['fusions']['median']:8.0f} {m['instructions']['median']:13.0f}"
        )
    name = "signal_compile_quick" if args.quick else "signal_compile"
    harness.write_results(name, {"repeats": repeats, "settings": settings, "summary": summary, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
