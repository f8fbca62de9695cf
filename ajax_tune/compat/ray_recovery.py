"""Tune's experiment snapshot and a trial's checkpoint manager, as `tune/recovery.py` rewrites them
so that trials resume from checkpoints the snapshot did not know. Tune has no public API for any
of it: these functions are every private name it uses."""

from __future__ import annotations

import json
from typing import Any

from ajax_tune.compat.base import gone, private

__all__ = [
    "checkpoint_results",
    "encode_experiment_state",
    "experiment_trials",
    "load_experiment_state",
    "newest_experiment_state",
    "set_checkpoint_results",
    "set_latest_checkpoint_result",
    "training_result",
    "trial_finished",
]


def newest_experiment_state(directory: str) -> str:
    """The path of the newest `experiment_state-*.json` snapshot in an experiment directory."""
    return private("ray.tune.execution.experiment_state", "_find_newest_experiment_checkpoint", "ray")(directory)


def load_experiment_state(text: str) -> dict:
    """A snapshot's contents, decoded as Tune wrote them (cloudpickled values inside JSON).

    A newer Ray's `TuneFunctionDecoder` refuses the cloudpickled values unless asked, and Tune
    reads its own snapshots with the private `_loads_with_cloudpickle`; an older Ray (2.54 and
    before) has no such function, and its decoder expands them."""
    from ray.tune.utils import serialization

    loads = getattr(serialization, "_loads_with_cloudpickle", None)
    if loads is not None:
        return loads(text)
    decoder = private("ray.tune.utils.serialization", "TuneFunctionDecoder", "ray")
    return json.loads(text, cls=decoder)


def experiment_trials(state: dict) -> list:
    """The trials of a decoded snapshot as Tune's `Trial` objects, with their run metadata
    (checkpoint manager, last result), ready to be changed and written back."""
    trial_class = private("ray.tune.experiment.trial", "Trial", "ray")
    trials = []
    for trial_json, metadata_json in state["trial_data"]:
        trial = trial_class.from_json_state(trial_json, stub=True)
        trial.restore_run_metadata(metadata_json)
        trial.stub = False  # stub only spared loading the trainable; the rewritten state is a real trial
        trials.append(trial)
    return trials


def trial_finished(trial: Any) -> bool:
    """Whether a `Trial` of a snapshot has terminated."""
    return trial.status == private("ray.tune.experiment.trial", "Trial", "ray").TERMINATED


def encode_experiment_state(state: dict, trials: list) -> str:
    """A snapshot with `trials` written back, encoded as Tune writes it."""
    encoder = private("ray.tune.utils.serialization", "TuneFunctionEncoder", "ray")
    return json.dumps({**state, "trial_data": [trial.get_json_state() for trial in trials]}, cls=encoder)


def training_result(checkpoint: Any, metrics: dict) -> Any:
    """What a trial's checkpoint manager registers: a checkpoint with the result it was saved at."""
    return private("ray.train._internal.session", "_TrainingResult", "ray")(checkpoint=checkpoint, metrics=metrics)


def checkpoint_results(manager: Any) -> list:
    """The checkpoints a trial's checkpoint manager has registered, oldest first (`_checkpoint_results`)."""
    results = getattr(manager, "_checkpoint_results", None)
    if not isinstance(results, list):
        raise gone("the checkpoint manager's `_checkpoint_results`", "ray")
    return results


def set_checkpoint_results(manager: Any, results: list) -> None:
    """Replace what a checkpoint manager has registered."""
    checkpoint_results(manager)  # checks the attribute is still there
    manager._checkpoint_results = list(results)  # noqa: SLF001


def set_latest_checkpoint_result(manager: Any, result: Any) -> None:
    """Make `result` the checkpoint a trial resumes from (`_latest_checkpoint_result`; None: none)."""
    if not hasattr(manager, "_latest_checkpoint_result"):
        raise gone("the checkpoint manager's `_latest_checkpoint_result`", "ray")
    manager._latest_checkpoint_result = result  # noqa: SLF001
