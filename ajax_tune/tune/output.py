"""What a Tune user sees of a trial: its name and the box Tune prints when it ends.

Tune decides these through hooks a trainable barely controls: trial names come only from
`TuneConfig` (hence `trial_names()`), the end-of-trial box from a class attribute Tune reads.
They live here so that `trainable.py` stays a thin shell over the `Runner`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any


class ResultBox(Collection):
    """The keys of the box Tune prints when a trial ends: what a person reads (time, env steps,
    the return, the learning rate, the level, the first `task_fields` fields of the task, and
    `metric`), not the 50 health, loss and per-seed keys; those stay in the result files.

    Tune asks `key in box` for each key of a result, in sorted order, so a task field that sorts
    before the last one asked starts the next box."""

    KEYS = ("training_iteration", "time_total_s", "env_steps", "eval/return_mean", "eval/return_std", "lr", "curriculum/level")
    TASK = "curriculum/task/"

    def __init__(self, metric: str | None = None, task_fields: int = 4):
        self.keys = [*self.KEYS, *([metric] if metric and metric not in self.KEYS else [])]
        self.task_fields, self._asked, self._last = task_fields, [], ""

    def __contains__(self, key: object) -> bool:
        if key in self.keys:
            return True
        if not isinstance(key, str) or not key.startswith(self.TASK):
            return False
        if key < self._last:
            self._asked = []
        self._last = key
        if key not in self._asked:
            self._asked.append(key)
        return self._asked.index(key) < self.task_fields

    def __iter__(self):
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


# -- trial names ----------------------------------------------------------------------------------
#
# Tune's default name is `<trainable>_<config["env"]>_<trial id>`: RLlib's convention, where `env` is
# an env's name. Ours is a mapping (name, kwargs, task), so a default name spells the whole mapping
# out, braces, quotes and commas included, and the directory adds every varied value after it.
# Tune gives a trainable no say in its trials' names; `trial_names()` is the one-liner for TuneConfig.

MAX_DIRNAME = 120  # Tune's default cuts at 130 characters; paths on some filesystems must stay short


def trial_names() -> dict[str, Any]:
    """`tune.TuneConfig(..., **trial_names())`: trials named `AjaxTrainable_<id>` and their
    directories `AjaxTrainable_<id>_<key>=<value>_...` for the values the search varied."""
    return {"trial_name_creator": trial_name, "trial_dirname_creator": trial_dirname}


def trial_name(trial) -> str:
    """`AjaxTrainable_<trial id>`, as Tune names a trial without an env name; the status table
    shows the varied values in their own columns."""
    return f"{trial.trainable_name}_{trial.trial_id}"


def trial_dirname(trial) -> str:
    """The trial's name, then the values the search chose for it (`lr=0.003_length=8`): safe in
    a path on any system, and enough to tell trials apart in a file browser."""
    name = trial_name(trial)
    tag = describe_values(getattr(trial, "evaluated_params", None) or {})
    return f"{name}_{tag}"[:MAX_DIRNAME].rstrip("_") if tag else name


def describe_values(params: Mapping[str, Any]) -> str:
    """`key=value` pairs joined by `_`, for Tune's flattened `{"agent/lr/peak": 0.003}`. A key
    is its last part, or as many trailing parts as make it unique (`lr.peak`); a mapping value is
    spelled out by its own keys."""
    flat = dict(pair for key, value in params.items() for pair in _leaves(tuple(str(key).split("/")), value))
    labels = {}
    for path in flat:
        depth = 1
        while depth < len(path) and sum(p[-depth:] == path[-depth:] for p in flat) > 1:
            depth += 1
        labels[path] = ".".join(path[-depth:])
    pairs = sorted((_clean(labels[path]), _clean(_short(value))) for path, value in flat.items())
    return "_".join(f"{key}={value}" for key, value in pairs)


def _leaves(path: tuple[str, ...], value: Any):
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves((*path, str(key)), inner)
    else:
        yield path, value


def _short(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "-".join(_short(v) for v in value)
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    return str(value)


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "_"
