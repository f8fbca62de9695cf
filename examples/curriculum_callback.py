"""Curriculum through a callback: a small `Callback` subclass that makes PointReach harder.

PointReach (ajax_tune.envs.point_reach) is a point mass that must come within `radius` of a
target `distance` away. Near, wide targets are learned in a few thousand steps; a far target
with a small radius needs the steering learned on easier ones first. `ReachCurriculum` below
looks at every result in `on_train_result(control, result)` (`control`: the trial's tasks) and,
after `patience` evaluations in a row with a success rate of at least `threshold`, moves the
target further away and shrinks its radius with `control.set_task(...)`.

What a callback adds over a bare `env_task_fn` (see curriculum_env_task_fn.py):
  - state: `get_state` / `set_state` put its counters into every checkpoint, so the curriculum
    survives a restore and travels with a PBT exploit;
  - `metrics()` adds keys to every result (here `curriculum/level`), so Tune can stop on them,
    schedule on them or plot them.

The config names the callback as an instance (sent to the worker by cloudpickle, like anything
defined in `__main__`), as a class, or as "module:Class" / {"class": "module:Class", "kwargs":
{...}} when it lives in an importable module, e.g. in YAML.

The built-in alternative is `ajax_tune.curriculum:ThresholdCurriculum`: a fixed ladder of tasks,
with promotion (and optional demotion and mixing of earlier levels). `--builtin` runs it with
the same ladder this callback climbs:

    {"class": "ajax_tune.curriculum:ThresholdCurriculum",
     "kwargs": {"levels": {"distance": [...], "radius": [...]}, "threshold": 0.8, "patience": 1}}

Run:
    python examples/curriculum_callback.py              # under a minute on 2 CPUs
    python examples/curriculum_callback.py --smoke      # seconds
    python examples/curriculum_callback.py --builtin    # the same ladder via ThresholdCurriculum
"""

import argparse
import json
import math
import os

import ray
from ray import tune

from ajax_tune import AjaxTrainable, trial_names
from ajax_tune.curriculum import Callback

START = {"distance": 0.5, "radius": 0.3}
HARDEST = {"distance": 3.0, "radius": 0.05}


class ReachCurriculum(Callback):
    """Farther and smaller targets after `patience` good evaluations in a row."""

    def __init__(self, threshold=0.8, patience=1, distance_factor=1.5, radius_factor=0.7):
        self.threshold, self.patience = threshold, patience
        self.distance_factor, self.radius_factor = distance_factor, radius_factor
        self.level, self.streak = 0, 0

    def on_train_result(self, control, result):
        success = result["eval/success_rate_mean"]
        if math.isnan(success):  # no evaluation in this call
            return
        self.streak = self.streak + 1 if success >= self.threshold else 0
        task = control.get_task()
        if self.streak < self.patience or task["distance"] >= HARDEST["distance"]:
            return
        control.set_task(
            {  # validated against the env's task spec before anything changes
                "distance": min(task["distance"] * self.distance_factor, HARDEST["distance"]),
                "radius": max(task["radius"] * self.radius_factor, HARDEST["radius"]),
            }
        )
        self.level, self.streak = self.level + 1, 0

    def get_state(self):  # saved with every checkpoint (JSON)
        return {"level": self.level, "streak": self.streak}

    def set_state(self, state):
        self.level, self.streak = state["level"], state["streak"]

    def metrics(self):  # added to every result
        return {"curriculum/level": float(self.level)}


def ladder(levels=12):
    """The tasks ReachCurriculum visits, as ThresholdCurriculum levels."""
    distance, radius, out = START["distance"], START["radius"], {"distance": [], "radius": []}
    for _ in range(levels):
        out["distance"].append(round(distance, 4))
        out["radius"].append(round(radius, 4))
        distance, radius = min(distance * 1.5, HARDEST["distance"]), max(radius * 0.7, HARDEST["radius"])
    return out


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
parser.add_argument("--storage-path", default="./results")
parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
parser.add_argument("--builtin", action="store_true", help="use ThresholdCurriculum instead")
args = parser.parse_args()
patience = 1 if args.smoke else 2  # evaluations in a row at or above the threshold

local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
ray.init(address=args.address, **local_ray)

if args.builtin:
    curriculum = {
        "class": "ajax_tune.curriculum:ThresholdCurriculum",
        "kwargs": {"levels": ladder(), "threshold": 0.8, "patience": patience},
    }
else:
    curriculum = ReachCurriculum(threshold=0.8, patience=patience)
config = {
    "env": {"name": "point_reach", "kwargs": {"max_episode_steps": 60}, "task": START},
    "agent": {
        "num_envs": 16,
        "unroll_length": 32,
        "num_minibatches": 4,
        "update_epochs": 4,
        "hidden_sizes": [32, 32],
        "lr": 3e-3,
    },
    "train": {
        "total_timesteps": 1_000_000,
        "timesteps_per_iteration": 16 * 32 * 4,
        "num_seeds": 2,
        "eval_episodes": 8 if args.smoke else 16,
    },
    "callbacks": [curriculum],
    "resources": {"cpu": 1 if args.smoke else 2},  # --smoke fits a test worker's one-CPU Ray
}
iterations = 6 if args.smoke else 60
tuner = tune.Tuner(
    AjaxTrainable,
    param_space=config,
    tune_config=tune.TuneConfig(**trial_names()),
    run_config=tune.RunConfig(
        name="curriculum_callback",
        storage_path=os.path.abspath(args.storage_path),
        stop={"training_iteration": iterations},
        verbose=0 if args.smoke else 1,
    ),
)
results = tuner.fit()
assert results.num_errors == 0, [r.error for r in results if r.error]

df = results[0].metrics_dataframe.sort_values("training_iteration")
print("\n iter  env_steps  trained on: distance  radius  eval success  next level")
for row in df.to_dict("records"):
    promoted = row["curriculum/next_task/distance"] != row["curriculum/task/distance"]
    print(
        f" {row['training_iteration']:4d}  {row['env_steps']:9d}  {row['curriculum/task/distance']:20.3f}  "
        f"{row['curriculum/task/radius']:6.3f}  {row['eval/success_rate_mean']:12.2f}  "
        f"{row['curriculum/level']:10.0f}{'  (promoted)' if promoted else ''}"
    )
first, last = df.iloc[0], df.iloc[-1]
summary = {
    "curriculum": "ThresholdCurriculum" if args.builtin else "ReachCurriculum",
    "first_task": {"distance": float(first["curriculum/task/distance"]), "radius": float(first["curriculum/task/radius"])},
    "final_task": {
        "distance": float(last["curriculum/next_task/distance"]),
        "radius": float(last["curriculum/next_task/radius"]),
    },
    "final_level": int(last["curriculum/level"]),
    "final_success_rate": float(last["eval/success_rate_mean"]),
}
print("RESULT " + json.dumps(summary))
ray.shutdown()
