"""Profile PPO's rollout and update, ours and Rejax's, on the CPU (or whatever JAX picks).

Runs each side's throughput worker once more under JAX's profiler with XLA's HLO dump on, then
attributes the program's time to kinds of op and to the Python source lines the ops came from
(`peers/xla_profile.py`). The trace and the dump stay under `--out-dir` for a closer look
(the trace opens in Perfetto; the dump's `*after_optimizations.txt` is the optimised program).

    python benchmarks/profile_ppo.py                   # 8 updates, 1 seed, both sides
    python benchmarks/profile_ppo.py --seeds 8 --sides ajax_tune

Profiler timings of tiny ops are inflated by the profiler's own cost per op; read the shares
as where the ops are, and time changes with ppo_throughput.py.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import harness
import ppo_throughput

sys.path.insert(0, str(harness.PEERS_DIR))
import xla_profile  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--updates", type=int, default=8, help="PPO updates of 16 x 128 env steps in the profiled run")
    parser.add_argument("--sides", nargs="+", default=["ajax_tune", "rejax"])
    parser.add_argument("--reset-mode", default=None)
    parser.add_argument("--peer-root", default=None)
    parser.add_argument("--out-dir", default=None, help="where traces and HLO dumps go (default: a temp dir)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    out_dir = pathlib.Path(args.out_dir or tempfile.mkdtemp(prefix="ajax_tune_profile_"))
    settings = ppo_throughput.work(args.seeds, 16 * 128 * args.updates, runs=1)
    reports = {}
    for side in args.sides:
        s = dict(settings, profile_dir=str(out_dir / side / "trace"))
        if side == "ajax_tune":
            python = sys.executable
            if args.reset_mode:
                s["reset_mode"] = args.reset_mode
        else:
            python = harness.peer_python(side, args.peer_root)
        dump = out_dir / side / "hlo"
        harness.run_worker(python, f"{side}_ppo.py", s, extra_env={"XLA_FLAGS": f"--xla_dump_to={dump}"})
        reports[side] = xla_profile.report(s["profile_dir"], str(dump), args.top, module="train")
        print(
            f"\n=== {side}: op self time {reports[side]['op_self_time_ms']} ms over "
            f"{reports[side]['ops_executed']} ops (executor overhead {reports[side]['executor_overhead_ms']} ms)"
        )
        for title in ("by_kind", "by_origin"):
            print(f"  {title}:")
            for name, ms, share in reports[side][title]:
                print(f"    {ms:10.3f} ms  {share:6.1%}  {name}")
    (out_dir / "report.json").write_text(json.dumps(reports, indent=2))
    print(f"\ntraces, HLO dumps and report.json in {out_dir}")


if __name__ == "__main__":
    main()
