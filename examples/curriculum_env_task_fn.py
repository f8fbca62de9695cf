"""Curriculum in the RLlib style: an `env_task_fn` that grows a deceptive corridor.

The corridor (ajax_tune.envs.corridor) has its goal `length` cells to the right of the start.
With `exit_reward: 0.2` the door behind the start is open and pays 0.2: trained directly on a
32-cell corridor, PPO learns to leave through the door and never finds the far end (worth 1).
The curriculum below starts at 4 cells, where the far end is found by chance, and adds 4 cells
each time every evaluation episode reaches the goal, up to 32.

The curriculum is RLlib's `env_task_fn(train_results, task_settable_env, env_ctx)`: after every
`train()` the trial calls it with the result; it returns the next task (or None to keep the
current one). The trial config names both the starting task and the function:

    {"env": {"name": "corridor", "task": {"length": 4, "exit_reward": 0.2}, ...},
     "env_task_fn": grow_corridor, ...}

How the Ray worker gets the function: Tune pickles the config with cloudpickle, which sends a
function defined in `__main__` (this script) by value, so passing the function object just
works. The other way, needed in YAML configs, is an import path "module:function"; then every
worker must be able to import the module. `--by-name` shows that: it names
"curriculum_env_task_fn:grow_corridor" and puts this directory on the workers' PYTHONPATH with
`ray.init(runtime_env={"env_vars": {"PYTHONPATH": ...}})`. (The worker imports this file as a
module, which is why everything that runs the experiment sits under `if __name__ == "__main__"`.)

Normal mode trains two trials side by side for the same budget: one with the curriculum from 4
cells, and one that starts at 32 (the same function can no longer grow it: direct training).

Run:
    python examples/curriculum_env_task_fn.py            # under a minute on 2 CPUs
    python examples/curriculum_env_task_fn.py --smoke    # seconds: curriculum trial only, short
"""

import argparse
import json
import os
import pathlib

FINAL_LENGTH = 32  # the corridor we actually care about
STEP = 4  # cells added per promotion


def grow_corridor(train_results, task_settable_env, env_ctx):
    """Four cells longer once every evaluation episode of every seed reached the far end."""
    if train_results["eval/success_rate_mean"] < 1.0:
        return None  # keep the current task
    length = task_settable_env.get_task()["length"]
    if length >= FINAL_LENGTH:
        return None
    return {"length": min(length + STEP, FINAL_LENGTH)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
    parser.add_argument("--storage-path", default="./results")
    parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
    parser.add_argument(
        "--by-name", action="store_true", help="name the env_task_fn as 'module:function' instead of passing the function"
    )
    args = parser.parse_args()

    import ray
    from ray import tune

    from ajax_tune import AjaxTrainable, trial_names

    here = pathlib.Path(__file__).resolve().parent
    local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
    if args.by_name:
        # Workers import "curriculum_env_task_fn" from this directory.
        pythonpath = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH", "")) if p)
        ray.init(address=args.address, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}, **local_ray)
        env_task_fn = "curriculum_env_task_fn:grow_corridor"
    else:
        ray.init(address=args.address, **local_ray)
        env_task_fn = grow_corridor  # sent to the worker by value

    iterations = 8 if args.smoke else 12
    start_lengths = [4] if args.smoke else [4, FINAL_LENGTH]  # 32: no room to grow, i.e. no curriculum
    config = {
        "env": {
            "name": "corridor",
            "kwargs": {"max_length": FINAL_LENGTH, "max_episode_steps": 40},
            "task": {"length": tune.grid_search(start_lengths), "exit_reward": 0.2},
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
            "total_timesteps": 1_000_000,
            "num_seeds": 2,
            "eval_episodes": 4,
            "timesteps_per_iteration": 16 * 32 * (2 if args.smoke else 6),
        },
        "env_task_fn": env_task_fn,
        "resources": {"cpu": 1},
    }
    tuner = tune.Tuner(
        AjaxTrainable,
        param_space=config,
        tune_config=tune.TuneConfig(**trial_names()),
        run_config=tune.RunConfig(
            name="curriculum_env_task_fn",
            storage_path=os.path.abspath(args.storage_path),
            stop={"training_iteration": iterations},
            verbose=0 if args.smoke else 1,
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]

    summary = {}
    for result in results:
        start = result.config["env"]["task"]["length"]
        label = "curriculum" if start < FINAL_LENGTH else "direct"
        df = result.metrics_dataframe.sort_values("training_iteration")
        print(f"\n{label} (starts at length {start}):")
        print("  iter  env_steps  trained on  eval success  eval return  next task")
        for row in df.to_dict("records"):
            print(
                f"  {row['training_iteration']:4d}  {row['env_steps']:9d}  "
                f"{row['curriculum/task/length']:10.0f}  {row['eval/success_rate_mean']:12.2f}  "
                f"{row['eval/return_mean']:11.2f}  {row['curriculum/next_task/length']:9.0f}"
            )
        last = df.iloc[-1]
        summary[label] = {
            "tasks": [int(x) for x in df["curriculum/task/length"]],
            "final_success_rate": float(last["eval/success_rate_mean"]),
            "final_return": float(last["eval/return_mean"]),
            "compilations": int(df["perf/compilations"].max()),
        }
    print("RESULT " + json.dumps(summary))
    ray.shutdown()


if __name__ == "__main__":
    main()
