"""How long tracing and lowering the loop's programs take (no XLA compile), against an earlier tree.

Each run is a fresh process (`peers/lowering.py`) that traces and lowers one built-in agent's
`init` and `train` programs (its default config, 2 seeds), as a trial's process does; the two
trees alternate (A B, B A, ...) for each agent:
this checkout's `ajax_tune`, and the one in `--before DIR` (a checkout of an earlier commit, e.g.
from `git worktree add DIR COMMIT`). The JSON records both trees' commits, not their paths.

    python benchmarks/lowering.py --before DIR              # 8 rounds
    python benchmarks/lowering.py --before DIR --quick      # 1 round
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import harness

AGENTS = ("ppo", "sac", "dqn")
KEYS = ("init_s", "train_s", "total_s")


def commit(tree: pathlib.Path) -> str:
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a checkout of the earlier tree")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="1 round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    before = pathlib.Path(args.before).resolve()
    if not (before / "ajax_tune" / "__init__.py").exists():
        raise SystemExit(f"--before {args.before}: no ajax_tune/ there; expected a checkout of an earlier commit")
    base = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    sides = {
        "this": ({"side": "this"}, base),
        "before": ({"side": "before", "before": str(before)}, {**base, "PYTHONPATH": str(before)}),
    }
    runs: dict[str, dict[str, list[dict]]] = {agent: {name: [] for name in sides} for agent in AGENTS}
    for r in range(repeats):
        for agent in AGENTS:
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                settings, env = sides[name]
                out = harness.run_worker(sys.executable, "lowering.py", {**settings, "agent": agent}, extra_env=env)
                if out["tree"] != name:
                    raise SystemExit(f"the {name} side imported the other tree's ajax_tune")
                runs[agent][name].append(out)
                print(f"[{agent} {name} {r + 1}/{repeats}] total {out['total_s']:.3f} s", file=sys.stderr, flush=True)
    summary = {agent: {name: harness.medians(rs, KEYS) for name, rs in by_side.items()} for agent, by_side in runs.items()}
    print(f"{'agent':6s} {'program':8s} {'this s':>8s} {'before s':>9s}  (medians of {repeats})")
    for agent in AGENTS:
        for key in KEYS:
            m = summary[agent]
            print(f"{agent:6s} {key[:-2]:8s} {m['this'][key]['median']:8.3f} {m['before'][key]['median']:9.3f}")
    name = "lowering_quick" if args.quick else "lowering"
    record = {"repeats": repeats, "commit": commit(pathlib.Path(__file__).parent), "before_commit": commit(before)}
    harness.write_results(name, {**record, "summary": summary, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
