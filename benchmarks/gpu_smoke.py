"""A short run for a GPU machine (under 5 minutes on one GPU): PPO on a brax env with many
envs, and PPO on cartpole with 64 seeds in one trial.

Nothing here picks a device: JAX uses the GPU when one is there (and the CPU otherwise, where
`--quick` keeps it short). Each part is a fresh process running the same worker the other
benchmarks use; the JSON records the device each ran on. Peers are not run: their venvs are
CPU builds.

    python benchmarks/gpu_smoke.py            # on a GPU machine
    python benchmarks/gpu_smoke.py --quick    # a CPU smoke of the same path
"""

from __future__ import annotations

import argparse
import sys
import time

import harness
import ppo_throughput


def parts(quick: bool) -> dict[str, dict]:
    brax_envs, brax_unroll = (16, 16) if quick else (2048, 16)
    brax = {
        "env": "brax/inverted_pendulum" if quick else "brax/ant",
        "num_seeds": 1,
        "num_envs": brax_envs,
        "unroll_length": brax_unroll,
        "epochs": 4,
        "minibatches": 4 if quick else 32,
        "hidden_sizes": [64, 64] if quick else [256, 256],
        "activation": "tanh" if quick else "swish",
        "lr": 3e-4,
        "lr_schedule": "constant",
        "max_grad_norm": 1.0,
        "normalize_observations": True,
        "total_steps": brax_envs * brax_unroll * (4 if quick else 20),
        "eval_episodes": 4,
        "runs": 1,
    }
    cartpole = dict(ppo_throughput.work(4 if quick else 64, 16 * 128 * (8 if quick else 240), runs=1), eval_episodes=8)
    return {"brax_ppo": brax, "cartpole_64_seeds": cartpole}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run on the CPU")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = {}
    for name, settings in parts(args.quick).items():
        out = harness.run_worker(sys.executable, "ajax_tune_ppo.py", settings)
        results[name] = {"settings": settings, **out}
        print(
            f"[{name}] device {out['device']}: {out['env_steps_per_s']:,.0f} env steps/s, "
            f"compile {out['compile_s']:.1f} s, eval return {out['eval_return']:.1f}, process {out['process_wall_s']:.0f} s",
            flush=True,
        )
    results["total_wall_s"] = round(time.perf_counter() - start, 1)
    path = harness.write_results("gpu_smoke" + ("_quick" if args.quick else ""), results, args.out)
    print(f"total {results['total_wall_s']} s (written to {path})")


if __name__ == "__main__":
    main()
