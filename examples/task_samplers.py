"""Task samplers: curricula over a distribution of tasks, learned between `train()` calls.

The distribution: corridors of 4 to 32 cells whose door behind the start pays 0.2 (see
ajax_tune.envs.corridor). A task sampler picks each env's corridor for the next call from the
per-env statistics of the last one (episodes, successes, returns and the agent's learning
signal, computed inside the jitted call):

- `uniform`: domain randomisation, the baseline;
- `learning_progress`: the lengths cut into bins, drawn where the success rate is moving;
- `plr`: prioritized level replay, a buffer of corridors scored by PPO's positive advantages.

One trial per sampler, by a grid search over `task_sampler`, with the same seeds and budget;
each is evaluated on 8 fixed held-out corridors (`heldout`), and Tune ranks them by the
held-out success rate. The sampler lives on the host, so a reused actor swaps it without
recompiling. The run ends by drawing the experiment's plots, `task_distribution.png` among
them: the share of envs that trained on each part of the length range, call by call.

Run:
    python examples/task_samplers.py            # about a minute on 2 CPUs
    python examples/task_samplers.py --smoke    # seconds once compiled: 3 short calls per sampler
"""

import argparse
import json
import os

SAMPLERS = {
    "uniform": {},
    "learning_progress": {"bins": 8},
    "plr": {"buffer_size": 16, "temperature": 0.1},
}
SPACE = {"length": [4, 32], "exit_reward": 0.2}
HELDOUT = [{"length": n} for n in range(4, 33, 4)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
    parser.add_argument("--storage-path", default="./results")
    parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
    args = parser.parse_args()

    import ray
    from ray import tune

    from ajax_tune import AjaxTrainable, trial_names
    from ajax_tune.plotting import plot_experiment

    local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
    ray.init(address=args.address, **local_ray)
    iterations = 3 if args.smoke else 12
    per_call = 16 * 32 * (2 if args.smoke else 6)
    config = {
        "env": {
            "name": "corridor",
            "kwargs": {"max_length": 32, "max_episode_steps": 40},
            "task": {"length": 4, "exit_reward": 0.2},
        },
        "agent": {
            "num_envs": 16,
            "unroll_length": 32,
            "num_minibatches": 2,
            "update_epochs": 2,
            "hidden_sizes": [32, 32],
            "lr": 3e-3,
        },
        "train": {
            "total_timesteps": iterations * per_call,
            "timesteps_per_iteration": per_call,
            "num_seeds": 2 if args.smoke else 4,
            "eval_episodes": 1,
        },
        "task_sampler": tune.grid_search(
            [{"name": name, "kwargs": {"space": SPACE, **kwargs}} for name, kwargs in SAMPLERS.items()]
        ),
        "heldout": {"tasks": HELDOUT},
        "resources": {"cpu": 1},
    }
    tuner = tune.Tuner(
        AjaxTrainable,
        param_space=config,
        tune_config=tune.TuneConfig(metric="eval/heldout/success_rate_mean", mode="max", reuse_actors=True, **trial_names()),
        run_config=tune.RunConfig(
            name="task_samplers",
            storage_path=os.path.abspath(args.storage_path),
            stop={"training_iteration": iterations},
            verbose=0 if args.smoke else 1,
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]

    summary = {}
    for result in results:
        name = result.config["task_sampler"]["name"]
        df = result.metrics_dataframe.sort_values("training_iteration")
        print(f"\n{name}:")
        print("  iter  env_steps  mean length trained  held-out success")
        for row in df.to_dict("records"):
            print(
                f"  {row['training_iteration']:4d}  {row['env_steps']:9d}  {row['tasks/length/mean']:20.1f}  "
                f"{row['eval/heldout/success_rate_mean']:16.2f}"
            )
        last = df.iloc[-1]
        summary[name] = {
            "heldout_success": [round(float(v), 3) for v in df["eval/heldout/success_rate_mean"]],
            "heldout_per_task": [float(last[f"eval/heldout/{i}/success_rate"]) for i in range(len(HELDOUT))],
            "trained_length_mean": [round(float(v), 2) for v in df["tasks/length/mean"]],
            "histogram_total": float(sum(last[c] for c in df.columns if c.startswith("tasks/length/bin"))),
            "draws": int(last["sampler/draws"]),
            "sampler_metrics": sorted(c for c in df.columns if c.startswith("sampler/")),
            "compilations": int(df["perf/compilations"].max()),
        }
    plots = plot_experiment(results.experiment_path)
    print("\nplots:", ", ".join(str(p) for p in plots))
    print("RESULT " + json.dumps({"iterations": iterations, "samplers": summary, "plots": sorted(p.name for p in plots)}))
    ray.shutdown()


if __name__ == "__main__":
    main()
