"""The host's reduction of one call's output to a result: plain floats under stable keys.

`summarize` turns a `CallOutput` (fixed-shape rows, `[lanes, updates]` per key, and the agent's
health) into the floats a result reports, under the names `ajax_tune.results.keys` declares: the latest
evaluation's mean, spread and per-seed values, the evaluation before the run's first update where
it ran, the agent's metrics, the task at the end of the call, and whether anything stopped being
finite (`Health`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ajax_tune.loop.rollout import EVAL_ROWS, TRAIN_ROWS
from ajax_tune.loop.state import CallOutput
from ajax_tune.results import keys

#: The rows of the held-out set (per lane and task) in the order of `keys.HELDOUT_NAMES`.
HELDOUT_ROWS = ("eval/heldout/return", "eval/heldout/success")
#: With `heldout.cvar`, the same tasks played again on independent keys, to score the worst chosen
#: by the first set of episodes.
RESCORED = {k: k.replace("eval/heldout/", "eval/heldout/rescored/") for k in HELDOUT_ROWS}


def _nanmean(x) -> float:
    x = np.asarray(x, np.float64)
    return float(np.mean(x[~np.isnan(x)])) if np.any(~np.isnan(x)) else math.nan


def worst_share(per_task, share: float = keys.WORST_SHARE) -> float:
    """The mean over the worst `share` of tasks (at least one), each task averaged over seeds
    first (`per_task`: [seeds, tasks]); tasks with no value are left out."""
    means = np.asarray(per_task, np.float64)
    if means.size == 0 or np.all(np.isnan(means)):
        return math.nan
    means = np.nanmean(means, axis=0)
    means = np.sort(means[~np.isnan(means)])
    return float(np.mean(means[: max(1, math.ceil(share * len(means)))]))


def cvar(select, score, share: float) -> float:
    """SFL's CVaR: per seed, the mean of `score` over the worst `share` of tasks (at least one) as
    `select` ranks them, `select` and `score` being independent evaluations of the same tasks
    (`[seeds, tasks]` each), then the mean over seeds; tasks missing from either are left out."""
    per_seed = []
    for chosen_by, scored in zip(np.asarray(select, np.float64), np.asarray(score, np.float64)):
        known = ~np.isnan(chosen_by) & ~np.isnan(scored)
        if known.any():
            worst = np.argsort(chosen_by[known], kind="stable")[: max(1, math.ceil(share * known.sum()))]
            per_seed.append(scored[known][worst].mean())
    return float(np.mean(per_seed)) if per_seed else math.nan


#: Row keys that are the loop's own; every other row is one of the agent's metrics.
LOOP_ROWS = ("timestep", "eval/", "task/", "train/")


def summarize(
    out: CallOutput, latest: tuple[str, ...] = ("lr",), summed: tuple[str, ...] = (), heldout_names=None, cvar_share=None
) -> dict[str, float]:
    """Plain floats under stable keys: the same keys every call, NaN where there is nothing.

    Evaluation values come from the call's last evaluation (mean, spread and per seed); the
    agent's metrics are averaged over the call, except those in `latest` (the value of a
    schedule), which are read after the last update, and those in `summed` (counts of events in
    the call), summed over its updates and averaged over seeds. Held-out tasks are reported under
    `heldout_names` (by default their indices).
    """
    rows = {k: np.asarray(v) for k, v in out.rows.items()}
    num_seeds = rows["timestep"].shape[0]
    result: dict[str, float] = {"timestep": float(rows["timestep"][0, -1])}

    evaluated = np.nonzero(rows["eval/timestep"][0] >= 0)[0]
    last = evaluated[-1] if len(evaluated) else None
    result["eval/timestep"] = float(rows["eval/timestep"][0, last]) if last is not None else -1.0
    result["eval/num_evaluations"] = float(len(evaluated))
    for key, name in (("eval/return", "return"), ("eval/length", "length"), ("eval/success", "success_rate")):
        per_seed = rows[key][:, last] if last is not None else np.full(num_seeds, np.nan)
        result[f"eval/{name}_mean"] = _nanmean(per_seed)
        if name == "return":
            result["eval/return_std"] = float(np.std(per_seed)) if last is not None else math.nan
            result["eval/return_min"] = float(np.min(per_seed)) if last is not None else math.nan
            result.update(zip(keys.seed_keys(num_seeds), map(float, per_seed)))
    if HELDOUT_ROWS[0] in rows:
        num_tasks = rows[HELDOUT_ROWS[0]].shape[-1]
        labels = keys.heldout_labels(num_tasks if heldout_names is None else heldout_names)
        if len(labels) != num_tasks:
            raise ValueError(f"{len(labels)} held-out names for {num_tasks} held-out tasks")
        for key, name in zip(HELDOUT_ROWS, keys.HELDOUT_NAMES):
            per_task = rows[key][:, last] if last is not None else np.full((num_seeds, num_tasks), np.nan)
            result[f"{keys.HELDOUT_PREFIX}{name}_mean"] = _nanmean(per_task)
            result[f"{keys.HELDOUT_PREFIX}{name}{keys.WORST_SUFFIX}"] = worst_share(per_task)
            if cvar_share is not None:  # chosen on the first set of episodes, scored on the second
                rescored = rows[RESCORED[key]][:, last] if last is not None else per_task
                result[f"{keys.HELDOUT_PREFIX}{name}{keys.cvar_suffix(cvar_share)}"] = cvar(per_task, rescored, cvar_share)
            if num_tasks <= keys.MAX_HELDOUT_TASK_KEYS or not all(label.isdigit() for label in labels):
                for i, label in enumerate(labels):
                    result[f"{keys.HELDOUT_PREFIX}{label}/{name}"] = _nanmean(per_task[:, i])

    for key, value in rows.items():
        if key.startswith("task/"):
            result[f"{keys.TASK_PREFIX}{key[len('task/') :]}"] = float(value[0, -1])
        elif not key.startswith(LOOP_ROWS):  # the agent's own metrics
            if key in latest:
                result[key] = float(np.mean(value[:, -1]))
            elif key in summed:
                result[key] = float(np.mean(np.sum(value, axis=1)))
            else:
                result[key] = _nanmean(value)

    episodes = rows["train/episodes"].astype(np.float64)
    for name in ("return", "length"):
        per_update = np.nan_to_num(rows[f"train/episode_{name}"].astype(np.float64))
        total = episodes.sum()
        result[f"train/episode_{name}_mean"] = float((per_update * episodes).sum() / total) if total else math.nan
    result["train/episodes"] = float(episodes.sum() / num_seeds)
    result["train/useful_steps"] = float(rows["train/useful_steps"].astype(np.float64).sum() / num_seeds)
    result.update(start_result(out.start))
    result.update(Health.of(out).result())
    return result


def summary_keys(num_lanes: int, num_heldout, task_shapes: dict, metrics, health_parts, cvar_share=None) -> list[str]:
    """The keys `summarize` writes for a program of these shapes: `summarize` itself, run on a
    call's output of NaN rows (nothing traced, nothing compiled), so the keys a result holds
    and the keys predicted for it (`expected_keys`) come from the same code. `num_heldout`:
    how many held-out tasks, or their names; `cvar_share`: the held-out set's `cvar`."""
    heldout_names = None if isinstance(num_heldout, int) else tuple(num_heldout)
    num_heldout = num_heldout if heldout_names is None else len(heldout_names)
    nan = lambda *shape: np.full((num_lanes, 1, *shape), np.nan, np.float32)  # noqa: E731 [lanes, one update, ...]
    rows = {"timestep": nan(), "eval/timestep": np.full((num_lanes, 1), -1.0), **{k: nan() for k in EVAL_ROWS}}
    if num_heldout:
        rows.update({f"eval/heldout/{k.split('/')[-1]}": nan(num_heldout) for k in EVAL_ROWS})
        if cvar_share is not None:
            rows.update({RESCORED[k]: nan(num_heldout) for k in HELDOUT_ROWS})
    rows.update({f"task/{name}": nan() for name in keys.task_field_keys(task_shapes)})
    rows.update({k: nan() for k in (*TRAIN_ROWS, *metrics)})
    start = {k: v[:, 0] for k, v in rows.items() if k.startswith("eval/") and k != "eval/timestep"}
    health = {part: np.ones((num_lanes, 1), np.float32) for part in health_parts}
    out = CallOutput(rows=rows, stats=None, health=health, start=start)
    return list(summarize(out, heldout_names=heldout_names, cvar_share=cvar_share))


def start_result(start: dict) -> dict[str, float]:
    """The evaluation before the first update (`CallOutput.start`) under `keys.START_KEYS`
    (and the held-out means): NaN where it did not run."""
    per_seed = np.asarray(start["eval/return"], np.float64)
    ran = bool(np.any(~np.isnan(per_seed)))
    spread = (lambda f: float(f(per_seed))) if ran else (lambda f: math.nan)  # noqa: E731
    values = (_nanmean(per_seed), spread(np.std), spread(np.min), spread(np.max), _nanmean(start["eval/success"]))
    result = dict(zip(keys.START_KEYS, values, strict=True))
    if HELDOUT_ROWS[0] in start:
        num_tasks = np.shape(start[HELDOUT_ROWS[0]])[-1]
        result.update(zip(keys.start_heldout_keys(num_tasks), (_nanmean(start[k]) for k in HELDOUT_ROWS), strict=True))
    return result


@dataclasses.dataclass(frozen=True)
class Health:
    """Per part of the agent, the first timestep of the call where it was not finite (-1: it
    stayed finite): what decides that a call diverged, and where."""

    nonfinite_at: dict[str, float]

    @classmethod
    def of(cls, out: CallOutput) -> Health:
        timestep = np.asarray(out.rows["timestep"])
        found = {}
        for part in sorted(out.health):
            bad = np.asarray(out.health[part]) == 0
            found[part] = float(timestep[bad].min()) if bad.any() else -1.0
        return cls(found)

    @property
    def diverged(self) -> bool:
        return any(at >= 0 for at in self.nonfinite_at.values())

    def first(self) -> tuple[float, str]:
        """The earliest (timestep, part) that stopped being finite; (-1, "?") when none did."""
        return min(((at, part) for part, at in self.nonfinite_at.items() if at >= 0), default=(-1.0, "?"))

    def result(self) -> dict[str, float]:
        """`train/nonfinite` (1.0 when any part of any seed stopped being finite during the
        call) and, per part, `health/<part>_nonfinite_at`."""
        out = {keys.health_key(part): at for part, at in self.nonfinite_at.items()}
        out[keys.NONFINITE] = float(self.diverged)
        return out
