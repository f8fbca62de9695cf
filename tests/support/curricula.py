"""Curriculum functions and callbacks used by the Tune tests (importable by Ray workers)."""

import json
import math
import os
import pathlib

from ajax_tune.curriculum import Callback

CORRIDOR = {"max_length": 32, "max_episode_steps": 40, "default_length": 4}


def grow_corridor(train_results, task_settable_env, env_ctx):
    """RLlib-style env_task_fn: four cells longer after every perfect evaluation."""
    assert env_ctx.num_envs == task_settable_env.num_envs
    task = task_settable_env.get_task()
    if train_results["eval/success_rate_mean"] >= 1.0:
        return {"length": min(task["length"] + 4, 32)}
    return None


def bad_task_fn(train_results, task_settable_env, env_ctx):
    return {"length": 1000}


class FailOnce(Callback):
    """Kill the trial once, at a given iteration, remembering across processes through a file."""

    def __init__(self, marker: str, at_iteration: int):
        self.marker, self.at_iteration = pathlib.Path(marker), at_iteration

    def on_train_result(self, control, result):
        if control.iteration == self.at_iteration and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            raise RuntimeError("injected failure")


class SamplerProbe(Callback):
    """Reports, as of the last checkpoint load: whether the task sampler held exactly the state
    the checkpoint recorded (its random stream aside), whether that stream was re-keyed, and
    whether the checkpoint came from another trial (a PBT exploit); NaN until a load."""

    def __init__(self):
        self.matched = self.reseeded = self.foreign = math.nan

    def on_checkpoint_load(self, control, checkpoint_dir):
        extra = json.loads((pathlib.Path(checkpoint_dir) / "ajax_tune.json").read_text())["extra"]
        state, saved = control.sampler.get_state(), extra["curricula"][control.member]["sampler"]
        stripped = [{k: v for k, v in s.items() if k != "rng"} for s in (state, saved)]
        self.matched = float(stripped[0] == stripped[1])
        self.reseeded = float(state["rng"] != saved["rng"])
        self.foreign = float(extra["trial_id"] != control.trial_id)

    def metrics(self):
        return {
            "probe/sampler_matched": self.matched,
            "probe/sampler_reseeded": self.reseeded,
            "probe/from_other_trial": self.foreign,
        }


# RLlib's documented curriculum function ("Curriculum Learning" in RLlib's advanced API guide),
# kept exactly as the guide prints it: a task is a level number.
def curriculum_fn(train_results, task_settable_env, env_ctx):
    # Very simple curriculum function.
    current_task = task_settable_env.get_task()
    new_task = current_task + 1
    return new_task
