"""A function trainable that owns the core object, as RLlib users own an `Algorithm`.

`ajax_tune.Runner` is one compiled training loop with its state: `train()` runs one call and
returns a dict of floats, `get_task()` / `set_task()` steer the envs, `save()` / `restore()`
write and read checkpoints. `AjaxTrainable` is a thin Tune class around it; writing the loop
yourself as a function trainable gives you the places in between, here:

  - the curriculum is plain Python between two `train()` calls (double the corridor's length
    once every evaluation episode reached its end);
  - every iteration is reported with `tune.report(metrics, checkpoint=...)`;
  - on a (re)start the trial continues from `tune.get_checkpoint()` when there is one, so Tune
    can recover it after a failure (and PBT could exploit it).

To show the restore path for real, the first attempt of the trial crashes on purpose after
`--crash-at` iterations (0: never); `FailureConfig(max_failures=1)` makes Tune restart it from
its last checkpoint, and the run carries on from there with the same task and env steps.

The function calls `configure_jax` first, as `AjaxTrainable.setup` does: it picks the CPU
platform, single-threaded XLA for a 1-CPU trial and the shared compilation cache, and must run
before JAX starts in the worker.

Run:
    python examples/function_trainable.py            # under a minute on 2 CPUs
    python examples/function_trainable.py --smoke    # seconds
"""

import argparse
import json
import os
import tempfile

import ray
from ray import tune

from ajax_tune import trial_names

MAX_LENGTH = 32


def train_corridor(config):
    from ajax_tune import configure_jax

    configure_jax(cpus=1)  # before anything starts JAX in this worker
    from ajax_tune import Runner

    runner = Runner(config["ajax"], trial_id=tune.get_context().get_trial_id())
    checkpoint = tune.get_checkpoint()
    resumed_from = 0
    if checkpoint:  # a restart after a failure (or a PBT exploit): continue from there
        with checkpoint.as_directory() as directory:
            runner.restore(directory)  # the state, including the task the envs are on
        resumed_from = runner.iteration

    while runner.iteration < config["iterations"]:
        if checkpoint is None and runner.iteration == config["crash_at"]:
            raise RuntimeError(f"crashing on purpose after iteration {runner.iteration}")
        result = runner.train()
        trained_on = runner.get_task()["length"]
        if result["eval/success_rate_mean"] >= 1.0 and trained_on < MAX_LENGTH:
            runner.set_task({"length": min(2 * trained_on, MAX_LENGTH)})
        with tempfile.TemporaryDirectory() as directory:
            runner.save(directory)
            tune.report(
                {**result, "next_length": runner.get_task()["length"], "resumed_from": resumed_from},
                checkpoint=tune.Checkpoint.from_directory(directory),
            )


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
parser.add_argument("--storage-path", default="./results")
parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
parser.add_argument("--crash-at", type=int, default=3, help="crash the first attempt after N iterations; 0: never")
args = parser.parse_args()

local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
ray.init(address=args.address, **local_ray)
ajax_config = {
    "env": {"name": "corridor", "kwargs": {"max_length": MAX_LENGTH, "max_episode_steps": 40}, "task": {"length": 4}},
    "agent": {"num_envs": 8, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [32, 32], "lr": 3e-3},
    "train": {
        "total_timesteps": 1_000_000,
        "num_seeds": 2,
        "eval_episodes": 4,
        "timesteps_per_iteration": 8 * 16 * (4 if args.smoke else 20),
    },
}
iterations = 6 if args.smoke else 20
tuner = tune.Tuner(
    tune.with_resources(train_corridor, {"cpu": 1}),
    param_space={"ajax": ajax_config, "iterations": iterations, "crash_at": args.crash_at or -1},
    tune_config=tune.TuneConfig(**trial_names()),
    run_config=tune.RunConfig(
        name="function_trainable",
        storage_path=os.path.abspath(args.storage_path),
        failure_config=tune.FailureConfig(max_failures=1),
        verbose=0 if args.smoke else 1,
    ),
)
results = tuner.fit()
assert results.num_errors == 0, [r.error for r in results if r.error]

result = results[0]
df = result.metrics_dataframe.sort_values("training_iteration")
print("\n iter  env_steps  trained on  eval success  next length  resumed from")
for row in df.to_dict("records"):
    print(
        f" {row['training_iteration']:4d}  {row['env_steps']:9d}  {row['curriculum/task/length']:10.0f}  "
        f"{row['eval/success_rate_mean']:12.2f}  {row['next_length']:11d}  {row['resumed_from']:12d}"
    )
last = result.metrics  # the last report (the table above comes from result.json, which can
# miss rows written just before the crash: Tune copies it back from storage on the restart)
summary = {
    "iterations": last["training_iteration"],
    "env_steps": last["env_steps"],
    "final_length": last["next_length"],
    "resumed_from": last["resumed_from"],
    "checkpoint": result.checkpoint.path if result.checkpoint else None,
}
print("RESULT " + json.dumps(summary))
ray.shutdown()
