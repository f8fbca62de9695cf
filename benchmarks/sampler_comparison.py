"""Task samplers where the choice of tasks matters: held-out success against env steps.

The task space is point_reach's whole range, distance in [0.05, 5] and radius in [0.01, 2], under
a 30-step time limit. From rest at full throttle the point covers 2.44 in 30 steps along an
axis and 3.45 along a diagonal (the force is clipped per axis), and a target's direction is
random: a target with distance - radius above 3.45 is out of reach (12% of the space), one above
2.44 is out of reach in most directions (31% in all), and one with radius >= distance is
reached on the first step whatever the policy does (19%). The
held-out set sits on the feasible frontier: distances 1.2, 1.6 and 2.0 with radii 0.03 and 0.1
(tight targets that need the whole episode and a straight line). Measured before any sampler
was built: PPO trained on the feasible band alone (distance in [0.5, 2.2], radius in
[0.01, 0.3]) reached 0.9 held-out success in 40 calls where uniform draws over the whole space
reached 0.35, so a sampler that finds the frontier has room to win.

Every sampler trains PPO on the same budget (`CALLS` calls of 8192 env steps), one run per seed
(a trial's seeds share its sampler's draws, so they are not independent repeats of a sampler):
run `i` uses train seed `i` and sampler seed `i`. All runs share one compiled program (the
sampler lives on the host; `reconfigure` swaps it, `perf/compilations` stays 1). Settings were
fixed before the first comparison: each sampler's defaults, except `bins: 4` for the binned
learning progress (its default 8 makes 64 bins for 64 envs: one env per bin and call).

Then two settings, fixed after that comparison, on the same seeds and budget (`VARIANTS`): the
binned learning progress at its default 8 bins, and PLR replaying 90% of its draws. The full run
measures the four samplers and the two variants and writes them to one JSON.

    python benchmarks/sampler_comparison.py            # 6 seeds x 40 calls: JSON and plot
    python benchmarks/sampler_comparison.py --quick    # 2 seeds x 6 calls, to prove it runs
    python benchmarks/sampler_comparison.py --variant 'lp8=learning_progress:{"bins": 8}'   # only these settings
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

from ajax_tune.runner import Runner

HERE = pathlib.Path(__file__).resolve().parent
IMAGE = HERE.parent / "docs" / "images" / "sampler_comparison.png"

SAMPLERS = ("uniform", "learning_progress", "alp_gmm", "plr")
SPACE = {"distance": [0.05, 5.0], "radius": [0.01, 2.0]}
HELDOUT = [{"distance": d, "radius": r} for d in (1.2, 1.6, 2.0) for r in (0.03, 0.1)]
STEPS_PER_CALL = 8192  # 64 envs x 32 steps x 4 updates
REACH = 2.44  # the farthest a 30-step episode gets from rest at full throttle along an axis
SAMPLER_KWARGS = {"learning_progress": {"bins": 4}}
# label -> (sampler, kwargs): the settings measured after the comparison was fixed
VARIANTS = {
    "learning_progress_bins8": ("learning_progress", {"bins": 8}),
    "plr_replay0.9": ("plr", {"replay_prob": 0.9}),
}


def config(sampler: str, seed: int, calls: int, kwargs: dict | None = None) -> dict:
    return {
        "env": {"name": "point_reach", "kwargs": {"max_episode_steps": 30}},
        "agent": {
            "num_envs": 64,
            "unroll_length": 32,
            "num_minibatches": 4,
            "update_epochs": 4,
            "hidden_sizes": [64, 64],
            "lr": 1e-3,
            "ent_coef": 0.0,
        },
        "train": {
            "total_timesteps": calls * STEPS_PER_CALL,
            "timesteps_per_iteration": STEPS_PER_CALL,
            "num_seeds": 1,
            "eval_episodes": 8,
            "seed": seed,
        },
        "task_sampler": {
            "name": sampler,
            "kwargs": {"space": SPACE, "seed": seed, **SAMPLER_KWARGS.get(sampler, {}), **(kwargs or {})},
        },
        "heldout": {"tasks": HELDOUT},
    }


def compare(samplers=SAMPLERS, seeds: int = 6, calls: int = 40) -> dict:
    """Held-out success curves, one per sampler and seed, from one compiled program.

    `samplers`: names, or a mapping of label -> (name, extra kwargs) for variants."""
    if not isinstance(samplers, dict):
        samplers = {name: (name, {}) for name in samplers}
    runner = None
    out = {"samplers": {}, "env_steps": [STEPS_PER_CALL * (c + 1) for c in range(calls)]}
    for label, (name, kwargs) in samplers.items():
        curves, kinds, entropy, seconds = [], [], [], 0.0
        for seed in range(seeds):
            if runner is None:
                runner = Runner(config(name, seed, calls, kwargs))
            else:
                assert runner.reconfigure(config(name, seed, calls, kwargs)) is False  # same program
            start = time.perf_counter()
            results, shares = [], []
            for _ in range(calls):
                results.append(runner.train())
                shares.append(task_shares(runner.curriculum.env_stats))
            seconds += time.perf_counter() - start
            curves.append([r["eval/heldout/success_rate_mean"] for r in results])
            kinds.append(shares)
            entropy += [r["sampler/entropy"] for r in results if not np.isnan(r.get("sampler/entropy", np.nan))]
            assert results[-1]["env_steps"] == calls * STEPS_PER_CALL
        curves = np.array(curves)
        out["samplers"][label] = {
            "sampler": name,
            "kwargs": kwargs,
            "curves": curves.round(4).tolist(),
            "mean": curves.mean(axis=0).round(4).tolist(),
            "std": curves.std(axis=0).round(4).tolist(),
            "final": final(curves),
            "trained": {k: round(float(np.nanmean([[c[k] for c in run] for run in kinds])), 4) for k in kinds[0][0]},
            # how far the draws were from uniform over the sampler's bins or buffer (1: uniform)
            "entropy_mean": round(float(np.mean(entropy)), 4) if entropy else None,
            "seconds": round(seconds, 1),
        }
    assert runner.loop.compilations == 1
    return out


def task_shares(stats) -> dict[str, float]:
    """What a call trained on, by the gap distance - radius the point must close: shares of
    targets no direction reaches in 30 steps (`unreachable`), of ones reached only towards a
    diagonal (`partly`: the force is clipped per axis, so a diagonal push is sqrt(2) stronger),
    of ones reached on the first step (`trivial`), and of reachable tight ones like the held-out
    set (`frontier`); and per kind, the envs' success rate and the agent's learning signal (what
    PLR ranks by: is it highest where learning happens?)."""
    d, r = np.asarray(stats.tasks["distance"], np.float64), np.asarray(stats.tasks["radius"], np.float64)
    gap = d - r
    kinds = {
        "unreachable": gap > REACH * np.sqrt(2),
        "partly": (gap > REACH) & (gap <= REACH * np.sqrt(2)),
        "trivial": gap <= 0,
        "frontier": (gap > 1.0) & (gap <= REACH) & (r <= 0.3),
    }
    kinds["other"] = ~np.any(list(kinds.values()), axis=0)
    success = np.divide(np.nan_to_num(stats.success_sum), stats.episodes, out=np.full(len(d), np.nan), where=stats.episodes > 0)
    out = {kind: float(np.mean(mask)) for kind, mask in kinds.items() if kind != "other"}
    for kind, mask in kinds.items():
        out[f"success/{kind}"] = float(np.nanmean(success[mask])) if mask.any() else np.nan
        out[f"signal/{kind}"] = float(np.nanmean(stats.learning_signal[mask])) if mask.any() else np.nan
    return out


def final(curves: np.ndarray, last: int = 5) -> dict:
    """The held-out success over the last `last` calls, per seed, and its mean and spread."""
    per_seed = np.asarray(curves)[:, -last:].mean(axis=1)
    return {
        "per_seed": per_seed.round(4).tolist(),
        "mean": round(float(per_seed.mean()), 4),
        "std": round(float(per_seed.std()), 4),
    }


def plot(out: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array(out["env_steps"]) / 1e3
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, s in out["samplers"].items():
        mean, std = np.array(s["mean"]), np.array(s["std"])
        ax.plot(steps, mean, label=f"{name} ({s['final']['mean']:.2f})")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("env steps per seed (thousands)")
    ax.set_ylabel("held-out success rate")
    ax.set_title(f"point_reach, whole task space, PPO: mean and std over {len(s['final']['per_seed'])} seeds")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds x 6 calls: proves it runs")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=NAME:JSON",
        help='run only these sampler variants, e.g. lp_bins8=learning_progress:{"bins": 8}',
    )
    parser.add_argument(
        "--out",
        default=None,
        help="result JSON (default: results/sampler_comparison.json; _quick or _variants for those runs)",
    )
    args = parser.parse_args()
    seeds = args.seeds or (2 if args.quick else 6)
    calls = args.calls or (6 if args.quick else 40)
    variants = {}
    for item in args.variant:
        label, rest = item.split("=", 1)
        name, _, kwargs = rest.partition(":")
        variants[label] = (name, json.loads(kwargs or "{}"))
    out = compare(variants or {**{name: (name, {}) for name in SAMPLERS}, **VARIANTS}, seeds=seeds, calls=calls)
    import harness  # a sibling when run as a script; tests import compare() alone

    out["meta"] = {
        "seeds": seeds,
        "calls": calls,
        "steps_per_call": STEPS_PER_CALL,
        "note": "seconds were measured on a machine shared with other work: noisy; success rates do not depend on load",
    }
    name = "sampler_comparison" + ("_variants" if variants else "") + ("_quick" if args.quick else "")
    summary = {**out, "samplers": {k: {f: v for f, v in s.items() if f != "curves"} for k, s in out["samplers"].items()}}
    path = harness.write_results(name, summary, args.out, raw={"samplers": {k: s["curves"] for k, s in out["samplers"].items()}})
    if not (args.quick or variants or args.out):
        plot({**out, "samplers": {k: out["samplers"][k] for k in SAMPLERS}}, IMAGE)
    for sampler, s in out["samplers"].items():
        f = s["final"]
        print(
            f"{sampler:18s} final {f['mean']:.3f} ± {f['std']:.3f}  per seed {f['per_seed']}  "
            f"trained {s['trained']}  {s['seconds']} s"
        )
    print(f"(written to {path})")


if __name__ == "__main__":
    main()
