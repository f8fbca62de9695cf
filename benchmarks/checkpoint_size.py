"""Checkpoint size and save / restore time of a SAC trial with a 100k-transition buffer.

The replay buffer lives in the trial's state, so a checkpoint holds it whole. One call of as many
env steps as the buffer holds fills it (an empty buffer compresses to almost nothing, so a full
one is the honest size); then `--repeats` saves and restores are timed (median). `--quick`
fills only a little of it.

    python benchmarks/checkpoint_size.py
    python benchmarks/checkpoint_size.py --seeds 8
"""

from __future__ import annotations

import argparse
import sys

import harness
from offpolicy_throughput import SAC


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 2
    results = []
    for num_seeds in args.seeds:
        unroll = SAC["agent_config"]["num_envs"] * SAC["agent_config"]["unroll_length"]
        per_call = unroll * 4 if args.quick else -(-args.capacity // unroll) * unroll
        # The call fills the buffer with the warm-up's uniform random actions and takes no gradient
        # step: a checkpoint's size and save/restore time depend on the buffer's contents and the
        # state's shapes, not on how trained the networks are, and the fill then takes seconds.
        agent = {**SAC["agent_config"], "capacity": args.capacity, "learning_starts": per_call}
        config = {
            "env": {"name": SAC["env"]},
            "agent": {"name": "sac", **agent},
            "train": {
                "total_timesteps": per_call * 10,
                "timesteps_per_iteration": per_call,
                "num_seeds": num_seeds,
                "eval_episodes": 2,
            },
        }
        out = harness.run_worker(sys.executable, "ajax_tune_checkpoint.py", {"config": config, "repeats": args.repeats})
        out["num_seeds"], out["capacity"], out["env_steps_before_save"] = num_seeds, args.capacity, per_call
        results.append(out)
        print(
            f"[{num_seeds} seed(s)] checkpoint {out['checkpoint_bytes'] / 2**20:.1f} MiB (state "
            f"{out['state_bytes'] / 2**20:.1f} MiB), save {out['save_s']:.3f} s, restore {out['restore_s']:.3f} s, "
            f"identical after restore: {out['restored_identical']}",
            flush=True,
        )
    path = harness.write_results("checkpoint_size" + ("_quick" if args.quick else ""), {"results": results}, args.out)
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
