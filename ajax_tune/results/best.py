"""Which trial, row, checkpoint and population member of a finished experiment is the best.

Read from Tune's `ResultGrid` and `Result` objects (duck-typed: nothing here imports Ray), so the
command line prints and W&B logs the same choice.
"""

from __future__ import annotations

import math
from typing import Any

from ajax_tune import compat
from ajax_tune.results import keys as K
from ajax_tune.schedules import KINDS


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def best_result(results, metric: str | None, mode: str | None):
    """(the best trial by `metric` at any iteration, the metric, the mode, why there is none): the
    experiment's metric and mode, else those the ResultGrid was given; the trial is None, with
    Tune's reason, when no trial reported the metric as a finite number."""
    default_metric, default_mode = compat.result_grid_defaults(results)
    metric, mode = metric or default_metric, mode or default_mode
    try:
        return results.get_best_result(metric=metric, mode=mode, scope="all", filter_nan_and_inf=True), metric, mode, None
    except (RuntimeError, ValueError) as exc:
        return None, metric, mode, exc


def best_row(frame, metric: str, mode: str):
    """The row of a trial's results (a DataFrame) where `metric` was best, or None."""
    if frame is None or metric not in frame or frame[metric].dropna().empty:
        return None
    values = frame[metric].replace([math.inf, -math.inf], math.nan).dropna()
    if values.empty:
        return None
    return frame.loc[values.idxmax() if mode == "max" else values.idxmin()]


def best_checkpoint(result, metric: str, mode: str):
    """(checkpoint, its result) of `result` whose result scored best by `metric` (NaN never
    counts); the latest checkpoint when none was scored; None without a checkpoint."""
    scored = [(c, m) for c, m in (result.best_checkpoints or []) if not _isnan(m.get(metric, math.nan))]
    if not scored:
        return (result.checkpoint, result.metrics) if result.checkpoint is not None else None
    pick = max if mode == "max" else min
    return pick(scored, key=lambda item: (item[1][metric], item[1].get("training_iteration", 0)))


def best_member(config: dict | None, row: dict) -> tuple[int, int, dict[str, Any]] | None:
    """For a population trial, (its best member at `row`, the population's size, that member's
    settings): the traced settings the row gives it (after exploits of PBT inside the trial, the
    explored ones, not the override it started from), those its override names and those in
    which the members differ. None for a trial without a population."""
    size, best = row.get(K.POPULATION_KEYS[0]), row.get(K.POPULATION_KEYS[1])
    if size is None or best is None or _isnan(size) or _isnan(best):
        return None
    k = int(best)
    prefix = K.member_key(k, "")
    # settings are the member's keys with no headline (its metrics are the trial's keys too)
    traced = [
        key[len(prefix) :]
        for key in row
        if key.startswith(prefix) and key[len(prefix) :].startswith(("agent/", "train/")) and key[len(prefix) :] not in row
    ]
    members = ((config or {}).get("population") or {}).get("members")
    given = _flat(members[k]) if isinstance(members, list) and k < len(members) else {}
    differ = [name for name in traced if len({row.get(K.member_key(j, name)) for j in range(int(size))}) > 1]
    # an override's key the row reports as it is, or not at all; a schedule given as a number
    # (`lr: 1e-3`) is reported by its parameters, shown where the members differ in them
    own = [g for g in given if g in traced or not any(name.startswith(g + "/") for name in traced)]
    settings = {}
    for name in [*own, *(name for name in differ if name not in own)]:
        value = row.get(K.member_key(k, name), given.get(name))
        settings[name.replace("/", ".")] = _setting_value(name, value)
    return k, int(size), settings


def _setting_value(name: str, value):
    """A traced setting as a config writes it: a schedule's kind is reported as its index."""
    if name.endswith("/kind") and isinstance(value, (int, float)) and not _isnan(value) and 0 <= int(value) < len(KINDS):
        return KINDS[int(value)]
    return value


def _flat(tree, prefix: str = "") -> dict:
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}/{key}" if prefix else str(key)))
    return out
