"""Population-based training over learning-rate *schedules*, without recompiling.

A schedule is a config value, `agent.lr = {"kind": "warmup_cosine", "peak": 3e-3,
"warmup_fraction": 0.1, "end_fraction": 0.1}`, and every one of its fields, the kind included,
is an array in the training state. The schedule is a function of the absolute env step and of
the run's horizon (`train.total_timesteps`), not of one call, so when PBT copies a good trial's
checkpoint into a bad one and perturbs the schedule, the clone continues from the current env
step on the new curve. Nothing about the program changes: with `reuse_actors=True` an exploit
is `reset_config` (the mutated schedule) plus `restore` (the donor's checkpoint) in the same
worker, which keeps its compiled program (`perf/compilations` stays 1).

At the end, for every trial of the final population, the script prints the schedule it
followed, read from its result rows (`config/agent/lr/*` are the schedule in force for that
row, `lr` the rate reached at the end of the call), one line per stretch of the same schedule.

Run:
    python examples/pbt_lr_schedule.py            # under a minute on 2 CPUs
    python examples/pbt_lr_schedule.py --smoke    # seconds
"""

import argparse
import json
import os
import pathlib

import ray
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining

from ajax_tune import AjaxTrainable, trial_names

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
parser.add_argument("--storage-path", default="./results")
parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
args = parser.parse_args()

local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
ray.init(address=args.address, **local_ray)

peaks = [3e-5, 1e-4, 3e-4, 1e-3]  # four trials, started low: PBT moves them where learning is faster
iterations, interval, unroll = (8, 2, 32) if args.smoke else (24, 3, 128)
steps_per_iteration = 16 * unroll * 2
config = {
    "env": {"name": "cartpole"},
    "agent": {
        "lr": {
            "kind": tune.choice(["warmup_cosine", "cosine", "linear"]),
            "peak": tune.grid_search(peaks),
            "warmup_fraction": 0.1,
            "end_fraction": 0.1,
        },
        "num_envs": 16,
        "unroll_length": unroll,
        "num_minibatches": 4,
        "update_epochs": 4,
        # a small network learns cartpole more slowly, which leaves PBT something to choose
        "hidden_sizes": [32, 32],
    },
    # the schedules span total_timesteps: the whole run, across exploits
    "train": {
        "total_timesteps": steps_per_iteration * iterations,
        "timesteps_per_iteration": steps_per_iteration,
        "num_seeds": 2,
        "eval_episodes": 8,
    },
    "resources": {"cpu": 1},  # two trials at a time: PBT pauses and resumes the other two
}
pbt = PopulationBasedTraining(
    time_attr="training_iteration",
    perturbation_interval=interval,
    quantile_fraction=0.25,
    resample_probability=0.25,
    hyperparam_mutations={
        "agent": {
            "lr": {
                "peak": tune.loguniform(1e-4, 1e-2),  # resampled, or multiplied by 0.8 / 1.2
                "warmup_fraction": [0.0, 0.1, 0.2],  # lists: moved to a neighbouring value
                "end_fraction": [0.0, 0.1, 0.3],
                "kind": ["warmup_cosine", "cosine", "linear"],
            }
        }
    },
)


class RecordRows(tune.Callback):
    """Keeps every result row as it arrives, per trial. (The trial's result.json can miss rows
    around PBT pauses: Tune re-downloads it from storage when a paused trial resumes.)"""

    def __init__(self):
        self.rows = {}

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.rows.setdefault(trial.trial_id, []).append(result)


recorder = RecordRows()
tuner = tune.Tuner(
    AjaxTrainable,
    param_space=config,
    tune_config=tune.TuneConfig(
        metric="eval/return_mean",
        mode="max",
        num_samples=1,
        scheduler=pbt,
        reuse_actors=True,
        **trial_names(),
    ),
    run_config=tune.RunConfig(
        name="pbt_lr_schedule",
        storage_path=os.path.abspath(args.storage_path),
        callbacks=[recorder],
        # CartPole's return tops out at 500; a solved trial stops (PBT would keep exploiting ties)
        stop={"training_iteration": iterations, "eval/return_mean": 500},
        verbose=0 if args.smoke else 1,
    ),
)
results = tuner.fit()
assert results.num_errors == 0, [r.error for r in results if r.error]

log = pathlib.Path(results.experiment_path) / "pbt_global.txt"  # one line per exploit
exploits = log.read_text().splitlines() if log.exists() else []
max_compilations, trials = 0, {}
for result in sorted(results, key=lambda r: -r.metrics["eval/return_mean"]):
    name = result.metrics["trial_id"]
    rows = recorder.rows[name]  # in the order reported: after an exploit the rows continue the clone
    max_compilations = max(max_compilations, max(int(row["perf/compilations"]) for row in rows))
    print(f"\n{name}: final eval/return_mean {result.metrics['eval/return_mean']:.1f}")
    segments, key = [], None
    for row in rows:
        lr = row["config"]["agent"]["lr"]  # the schedule in force for this row
        schedule = (lr["kind"], lr["peak"], lr["warmup_fraction"], lr["end_fraction"])
        if schedule != key:
            segments.append({"schedule": schedule, "from": row["env_steps"] - steps_per_iteration, "lrs": []})
            key = schedule
        segments[-1]["to"] = row["env_steps"]
        segments[-1]["lrs"].append(row["lr"])  # the rate reached at the end of the call
        segments[-1]["return"] = row["eval/return_mean"]
    for s in segments:
        kind, peak, warmup, end = s["schedule"]
        print(
            f"  env steps {s['from']:7d}-{s['to']:7d}: {kind:13s} peak {peak:.2e} warmup {warmup:.1f} "
            f"end {end:.1f} | lr {s['lrs'][0]:.2e} -> {s['lrs'][-1]:.2e} | return {s['return']:.1f}"
        )
    trials[name] = {
        "return": result.metrics["eval/return_mean"],
        "schedules": len(segments),
        "iterations": [row["training_iteration"] for row in rows],
        "env_steps": [row["env_steps"] for row in rows],
    }

print(f"\nPBT exploits: {len(exploits)}; most compilations in any worker process: {max_compilations}")
summary = {
    "trials": trials,
    "exploits": len(exploits),
    "max_compilations": max_compilations,
    "best_return": max(t["return"] for t in trials.values()),
}
print("RESULT " + json.dumps(summary))
ray.shutdown()
