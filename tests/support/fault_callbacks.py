"""Faults to inject into real runs (importable by Ray workers: the repository root is on their PYTHONPATH)."""

import os
import pathlib
import signal
import time

from ajax_tune.curriculum import Callback


class HoldAfter(Callback):
    """Hold a trial after an iteration (before reporting the next one) while a marker file
    exists, so a test can act on a run whose checkpoints it knows."""

    def __init__(self, marker: str, iteration: int):
        self.marker, self.iteration = pathlib.Path(marker), iteration

    def on_train_result(self, control, result):
        while control.iteration > self.iteration and self.marker.exists():
            time.sleep(0.2)


class KillOnce(Callback):
    """SIGKILL the trial's own process at an iteration, once (remembered in a file)."""

    def __init__(self, marker: str, at_iteration: int):
        self.marker, self.at_iteration = pathlib.Path(marker), at_iteration

    def on_train_result(self, control, result):
        if control.iteration == self.at_iteration and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)


class RecordNode(Callback):
    """Write the Ray node this trial runs on into a directory (one file per node)."""

    def __init__(self, directory: str):
        self.directory = pathlib.Path(directory)

    def on_setup(self, control):
        import ray

        (self.directory / ray.get_runtime_context().get_node_id()).write_text(control.trial_id)


class RaiseOnTrainResult(Callback):
    def on_train_result(self, control, result):
        raise RuntimeError("callback failed on purpose")


def raise_at_iteration_two(train_results, task_settable_env, env_ctx):
    if train_results["env_steps"] >= 2 * 512:
        raise ValueError("curriculum failed on purpose")
    return None
