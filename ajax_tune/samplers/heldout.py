"""Held-out tasks: a fixed set evaluated inside every evaluation, so generalisation is a metric.

Written in a trial config as a list of tasks, or as draws from a space (seeded, so every trial
of an experiment evaluates the same set):

    heldout: {tasks: [{length: 6}, {length: 20}, {length: 30}]}
    heldout: {space: {length: [4, 32], exit_reward: 0.1}, num_tasks: 8, seed: 0}

The loop evaluates the K tasks (K is static: the batch is data) and writes
`eval/heldout/return` and `eval/heldout/success` as [num_seeds, updates, K] rows, NaN where no
evaluation happened. `summarize_heldout` turns the call's last evaluation into results: a mean
over tasks and seeds (`eval/heldout/return_mean`, `eval/heldout/success_rate_mean`) and one
value per task (`eval/heldout/<i>/return_mean`, ...), under the same keys every call.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.samplers.space import TaskSpace

KEYS = ("tasks", "space", "num_tasks", "seed")
ROWS = {"return": "eval/heldout/return", "success_rate": "eval/heldout/success"}


def heldout_tasks(spec: Mapping | None, env, base: Mapping | None = None) -> dict[str, np.ndarray] | None:
    """The held-out set as one batch (field -> [K, *shape]), checked against the env; None if unset.

    Fields a task leaves out take the trial's starting task (`base`)."""
    if spec is None:
        return None
    from ajax_tune.config import check_keys

    if not isinstance(spec, Mapping):
        raise ConfigError(f"heldout must be a mapping, {{tasks: [...]}} or {{space: ..., num_tasks: K}}, got {spec!r}")
    check_keys(spec, KEYS, "heldout.")
    base = env.validate_task(base or {})
    if ("tasks" in spec) == ("space" in spec):
        raise ConfigError("heldout needs exactly one of tasks (a list of tasks) or space (with num_tasks and seed)")
    if "tasks" in spec:
        extra = sorted(set(spec) & {"num_tasks", "seed"})
        if extra:
            raise ConfigError(f"heldout.tasks is a fixed list; {extra} apply only to heldout.space")
        tasks = spec["tasks"]
        if not isinstance(tasks, (list, tuple)) or not tasks:
            raise ConfigError(f"heldout.tasks must be a non-empty list of tasks, got {tasks!r}")
        checked = []
        for i, task in enumerate(tasks):
            try:
                checked.append(env.validate_task(task, current=base))
            except TaskError as exc:
                raise ConfigError(f"heldout.tasks[{i}]: {exc}") from None
        return {k: np.stack([t[k] for t in checked]) for k in checked[0]}
    num_tasks, seed = spec.get("num_tasks"), spec.get("seed", 0)
    if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1:
        raise ConfigError(f"heldout.num_tasks must be an integer >= 1 (how many tasks to draw), got {num_tasks!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"heldout.seed must be an integer >= 0, got {seed!r}")
    space = TaskSpace(spec["space"], where="heldout").bind(env, base=base)
    drawn = space.draw(np.random.default_rng(seed), num_tasks)
    return {k: np.stack([v] * num_tasks) if k not in drawn else drawn[k] for k, v in base.items()}


def heldout_keys(num_tasks: int) -> list[str]:
    keys = ["eval/heldout/return_mean", "eval/heldout/success_rate_mean"]
    for i in range(num_tasks):
        keys += [f"eval/heldout/{i}/return_mean", f"eval/heldout/{i}/success_rate_mean"]
    return keys


def summarize_heldout(rows: Mapping[str, np.ndarray], num_tasks: int) -> dict[str, float]:
    """Results of the call's last held-out evaluation (every key NaN when there was none)."""
    out = dict.fromkeys(heldout_keys(num_tasks), math.nan)
    returns = np.asarray(rows[ROWS["return"]], np.float64)  # [seeds, updates, K]
    if returns.ndim != 3 or returns.shape[2] != num_tasks:
        raise ValueError(f"{ROWS['return']} must be [num_seeds, updates, {num_tasks}], got shape {returns.shape}")
    evaluated = np.nonzero(~np.all(np.isnan(returns), axis=(0, 2)))[0]
    if not len(evaluated):
        return out
    last = evaluated[-1]
    for name, key in ROWS.items():
        values = np.asarray(rows[key], np.float64)[:, last, :]  # [seeds, K]
        per_task = _nanmean(values, axis=0)
        out[f"eval/heldout/{name}_mean"] = float(_nanmean(per_task, axis=0))
        for i, v in enumerate(per_task):
            out[f"eval/heldout/{i}/{name}_mean"] = float(v)
    return out


def _nanmean(x: np.ndarray, axis: int) -> Any:
    counted = (~np.isnan(x)).sum(axis=axis)
    return np.where(counted > 0, np.nansum(x, axis=axis) / np.maximum(counted, 1), np.nan)
