"""A hyperparameter search written directly in Python: CartPole, lr x ent_coef, ASHA.

The trial config is a plain nested dict; Tune search spaces go wherever a value would. Each
trial is an `AjaxTrainable`: one compiled PPO loop that trains `num_seeds` seeds side by side
(vmapped), evaluates them inside the compiled call and reports `eval/return_mean` over seeds.
ASHA stops the weaker half of the trials at each rung (iterations 2, 4, 8, ...).

`lr` and `ent_coef` are traced hyperparameters (arrays in the training state), so with
`reuse_actors=True` a worker that finishes one trial starts the next without recompiling:
`AjaxTrainable.reset_config` swaps the values into the already compiled program. Changing a
static setting (network size, num_envs, ...) in the search would rebuild it.

The same kind of search written as YAML runs with the CLI:
`ajax-tune run configs/search_cartpole_asha.yaml`.

Run:
    python examples/tune_search.py            # about a minute on 2 CPUs
    python examples/tune_search.py --smoke    # seconds
"""

import argparse
import json
import os

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from ajax_tune import AjaxTrainable, trial_names

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
parser.add_argument("--storage-path", default="./results")
parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
args = parser.parse_args()

local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
ray.init(address=args.address, **local_ray)

num_samples, max_iterations, unrolls_per_iteration = (4, 4, 2) if args.smoke else (16, 24, 6)
config = {
    "env": {"name": "cartpole"},
    "agent": {
        "lr": tune.loguniform(1e-4, 1e-2),
        "ent_coef": tune.uniform(0.0, 0.02),
        "num_envs": 16,
        "unroll_length": 128,
        "num_minibatches": 4,
        "update_epochs": 4,
    },
    "train": {
        "total_timesteps": 16 * 128 * unrolls_per_iteration * max_iterations,  # the lr schedule's horizon
        "timesteps_per_iteration": 16 * 128 * unrolls_per_iteration,
        "num_seeds": 2,
        "eval_episodes": 8,
    },
    "resources": {"cpu": 1},  # two trials at a time on 2 CPUs
}
asha = ASHAScheduler(time_attr="training_iteration", max_t=max_iterations, grace_period=2, reduction_factor=2)
tuner = tune.Tuner(
    AjaxTrainable,
    param_space=config,
    tune_config=tune.TuneConfig(
        metric="eval/return_mean",
        mode="max",
        num_samples=num_samples,
        scheduler=asha,
        reuse_actors=True,
        **trial_names(),
    ),
    run_config=tune.RunConfig(
        name="tune_search",
        storage_path=os.path.abspath(args.storage_path),
        verbose=0 if args.smoke else 1,
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=0, checkpoint_at_end=True),
    ),
)
results = tuner.fit()
assert results.num_errors == 0, [r.error for r in results if r.error]

print("\n trial                         lr  ent_coef  iterations  eval return")
for result in sorted(results, key=lambda r: -r.metrics["eval/return_mean"]):
    agent = result.config["agent"]
    print(
        f" {result.metrics['trial_id']:20s}  {agent['lr']:9.2e}  {agent['ent_coef']:8.4f}  "
        f"{result.metrics['training_iteration']:10d}  {result.metrics['eval/return_mean']:11.1f}"
    )

best = results.get_best_result()  # by the TuneConfig's metric and mode, at each trial's last result
print(
    f"\nbest: lr={best.config['agent']['lr']:.2e} ent_coef={best.config['agent']['ent_coef']:.4f} "
    f"eval/return_mean={best.metrics['eval/return_mean']:.1f} after {best.metrics['env_steps']} env steps per seed"
)
print(f"its checkpoint: {best.checkpoint.path}")
summary = {
    "best_config": {"lr": best.config["agent"]["lr"], "ent_coef": best.config["agent"]["ent_coef"]},
    "best_return": best.metrics["eval/return_mean"],
    "returns": sorted(r.metrics["eval/return_mean"] for r in results),
    "iterations": sorted(r.metrics["training_iteration"] for r in results),
    "max_compilations": max(int(r.metrics_dataframe["perf/compilations"].max()) for r in results),
}
print("RESULT " + json.dumps(summary))
ray.shutdown()
