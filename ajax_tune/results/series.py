"""A finished (or running) experiment's results as series: each trial's rows in order, cut
into the contiguous lineage segments a PBT exploit leaves, with the curves and distributions
the plots draw (`plotting.py`).

Each trial's rows come from its own record, `ajax_tune_results.jsonl` (`results/record.py`: every
iteration once, across restores and PBT exploits, written by the trial itself), and from Tune's
`progress.csv` only for a trial without one (a function trainable's); its labels come from
`params.json`. Nothing else is read, so this works on a copied results folder without Ray.
"""

from __future__ import annotations

import json
import math
import pathlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ajax_tune import compat
from ajax_tune.results import keys as K
from ajax_tune.results import record

STEP = "env_steps"
OFFLINE_STEP = "gradient_steps"  # what an offline trial counts instead (it reports env_steps 0)
RETURN = "eval/return_mean"
SEED_PREFIX = "eval/return_seed"
TASK_PREFIX = "curriculum/task/"
LEVEL = "curriculum/level"
HISTOGRAM_PREFIX = "tasks/"  # tasks/<field>/bin<i>, /low, /high: the share of envs per part of a range
MAX_DISTRIBUTION_TRIALS = 8
MAX_LABEL = 48


@dataclass
class TrialSeries:
    """One trial's rows in file order, cut into contiguous lineage segments."""

    trial_id: str
    label: str
    frame: pd.DataFrame
    segments: list[pd.DataFrame] = field(default_factory=list)
    axis: str = STEP  # what the frame's STEP column counts: env steps, or an offline trial's updates


def lineage_segments(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """Cut where `env_steps` does not advance by exactly `timesteps_this_iter`.

    Such a row did not continue the previous one: it continued a restored checkpoint (a PBT
    exploit's donor, usually). An exploit of a donor at the same env step does not show here; its
    line stays whole, which the continuous step axis allows.
    """
    if frame.empty:
        return []
    steps = frame[STEP].to_numpy(np.float64)
    budget = frame["timesteps_this_iter"].to_numpy(np.float64)
    breaks = np.nonzero(steps[1:] - steps[:-1] != budget[1:])[0] + 1
    bounds = [0, *breaks.tolist(), len(frame)]
    return [frame.iloc[a:b].reset_index(drop=True) for a, b in zip(bounds[:-1], bounds[1:])]


def seed_columns(frame: pd.DataFrame) -> list[str]:
    """`eval/return_seed0..K-1`, in seed order (not string order: seed10 after seed9)."""
    cols = [c for c in frame.columns if c.startswith(SEED_PREFIX) and c[len(SEED_PREFIX) :].isdigit()]
    return sorted(cols, key=lambda c: int(c[len(SEED_PREFIX) :]))


def seed_band(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-row min and max over the seeds' evaluation returns (NaN where none evaluated)."""
    cols = seed_columns(frame)
    if not cols:
        nan = np.full(len(frame), np.nan)
        return nan, nan.copy()
    values = frame[cols].to_numpy(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no evaluation, NaN is right
        return np.nanmin(values, axis=1), np.nanmax(values, axis=1)


def learning_curve(segment: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(env_steps, mean return, seed min, seed max) of the rows that evaluated, from env step 0
    where the segment's first row holds the evaluation before the first update."""
    if RETURN not in segment:
        return (np.zeros(0),) * 4
    evaluated = segment[segment[RETURN].notna()]
    lo, hi = seed_band(evaluated)
    curve = evaluated[STEP].to_numpy(np.float64), evaluated[RETURN].to_numpy(np.float64), lo, hi
    start = start_point(segment, RETURN)
    if start is None:
        return curve
    band = [start_point(segment, f"{K.START_PREFIX}return_{end}") for end in ("min", "max")]
    first = (0.0, start, *(math.nan if v is None else v for v in band))
    return tuple(np.concatenate([[v], c]) for v, c in zip(first, curve))


def start_point(segment: pd.DataFrame, column: str) -> float | None:
    """The start evaluation's value of `column` (`eval/start/...` for `eval/...`) when the
    segment's first row has it: only a run's first result does, so a segment that continued a
    restored checkpoint (a PBT exploit) starts where it was restored."""
    start = column if column.startswith(K.START_PREFIX) else K.start_key(column)
    if start is None or start not in segment or segment.empty:
        return None
    value = float(segment[start].iloc[0])
    return value if math.isfinite(value) else None


def histogram_fields(trials: list[TrialSeries]) -> list[str]:
    """Task fields whose per-call histograms the results carry."""
    fields = set()
    for trial in trials:
        for column in trial.frame.columns:
            if column.startswith(HISTOGRAM_PREFIX) and column.endswith("/low"):
                fields.add(column[len(HISTOGRAM_PREFIX) : -len("/low")])
    return sorted(fields)


def task_distribution(segment: pd.DataFrame, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(env-step edges [rows + 1], task-value edges [bins + 1], shares [bins, rows]) of one lineage
    segment: each row's call spans the env steps from the previous row's to its own."""
    prefix = f"{HISTOGRAM_PREFIX}{field}/"
    bins = sorted(
        (c for c in segment.columns if c.startswith(prefix + "bin") and c[len(prefix) + 3 :].isdigit()),
        key=lambda c: int(c[len(prefix) + 3 :]),
    )
    rows = segment[segment[prefix + "low"].notna()] if prefix + "low" in segment else segment.iloc[:0]
    if rows.empty or not bins:
        return np.zeros(0), np.zeros(0), np.zeros((len(bins), 0))
    steps = rows[STEP].to_numpy(np.float64)
    x = np.concatenate([steps[:1] - rows["timesteps_this_iter"].to_numpy(np.float64)[:1], steps])
    y = np.linspace(float(rows[prefix + "low"].iloc[-1]), float(rows[prefix + "high"].iloc[-1]), len(bins) + 1)
    return x, y, rows[bins].to_numpy(np.float64).T


def load_trials(experiment_dir: str | pathlib.Path) -> list[TrialSeries]:
    """Every trial directory with at least one result row, labelled by what sets it apart.

    Labels come from `params.json`, which Tune rewrites after a PBT exploit: they show the
    hyperparameters a trial ended with.
    """
    root = pathlib.Path(experiment_dir)
    found: list[tuple[pathlib.Path, pd.DataFrame, dict[str, Any], str]] = []
    directories = {p.parent for pattern in (f"*/{record.FILE_NAME}", "*/progress.csv") for p in root.glob(pattern)}
    for directory in sorted(directories):
        frame = trial_rows(directory)
        if frame is None or frame.empty or STEP not in frame or "timesteps_this_iter" not in frame:
            continue
        params_file = directory / "params.json"
        params = _flatten(json.loads(params_file.read_text())) if params_file.exists() else {}
        axis = STEP
        if offline(frame):  # drawn against its gradient updates, which `timesteps_this_iter` counts
            frame, axis = frame.assign(**{STEP: frame[OFFLINE_STEP]}), OFFLINE_STEP
        found.append((directory, frame, params, axis))
    if not found:
        raise ValueError(f"no trial results ({record.FILE_NAME} or progress.csv with env_steps rows) under {root}")

    differing = _differing_keys([params for _, _, params, _ in found])
    trials = []
    for directory, frame, params, axis in found:
        trial_id = str(frame["trial_id"].iloc[0]) if "trial_id" in frame else directory.name
        # a key this trial does not have (another sampler's option) says nothing about it
        parts = [f"{name}={_short(params[key])}" for key, name in differing.items() if params.get(key) is not None]
        trials.append(TrialSeries(trial_id, " ".join(parts), frame, lineage_segments(frame), axis))
    repeated = {t.label for t in trials if not t.label or sum(o.label == t.label for o in trials) > 1}
    for trial in trials:  # the id only where the values do not tell trials apart
        if trial.label in repeated:
            trial.label = " ".join(filter(None, [trial.trial_id, trial.label]))
        if len(trial.label) > MAX_LABEL:
            trial.label = trial.label[: MAX_LABEL - 1] + "…"
    return trials


def trial_rows(directory: pathlib.Path) -> pd.DataFrame | None:
    """A trial's rows: its own record where it has one, else Tune's `progress.csv`."""
    rows = record.read(directory)
    if rows:
        frame = pd.DataFrame(rows)
        if "trial_id" not in frame:
            frame["trial_id"] = directory.name
        return frame
    progress = directory / "progress.csv"
    if not progress.exists():
        return None
    try:
        return compat.read_csv_exactly(progress, dtype={"trial_id": str})
    except pd.errors.EmptyDataError:
        return None


def offline(frame: pd.DataFrame) -> bool:
    """An offline trial's rows: gradient updates counted, no env step taken."""
    return OFFLINE_STEP in frame and bool((frame[STEP].fillna(0) == 0).all()) and bool(frame[OFFLINE_STEP].notna().any())


def axis_label(trials: list[TrialSeries]) -> str:
    """The x axis's name: env steps, gradient steps where every trial is offline."""
    kinds = {t.axis for t in trials}
    if kinds == {OFFLINE_STEP}:
        return OFFLINE_STEP
    return STEP if kinds <= {STEP} else f"{STEP} ({OFFLINE_STEP} for offline trials)"


def member_series(trial: TrialSeries) -> list[TrialSeries]:
    """A population trial's members as series of their own (`member/<k>/<key>` read as `<key>`),
    labelled by the settings that set them apart; [] for a trial without a population. The
    trial's headline curve is its best member's at each row, so the members' curves replace it."""
    frame = trial.frame
    if K.POPULATION_KEYS[0] not in frame or frame[K.POPULATION_KEYS[0]].dropna().empty:
        return []
    size = int(frame[K.POPULATION_KEYS[0]].max())
    shared = [c for c in (STEP, "timesteps_this_iter", "training_iteration") if c in frame]
    members = []
    for k in range(size):
        prefix = K.member_key(k, "")
        own = {c: c[len(prefix) :] for c in frame.columns if c.startswith(prefix)}
        members.append(pd.concat([frame[shared], frame[list(own)].rename(columns=own)], axis=1))
    settings = sorted({c for m in members for c in m.columns if c.startswith(("agent/", "train/"))})
    differing = [c for c in settings if len({_short(m[c].iloc[-1]) for m in members if c in m}) > 1]
    out = []
    for k, member in enumerate(members):
        parts = [f"{c.split('/', 1)[1]}={_short(float(member[c].iloc[-1]))}" for c in differing if c in member]
        label = " ".join([f"{trial.label} m{k}".strip(), *parts])
        label = label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"
        out.append(TrialSeries(f"{trial.trial_id}/m{k}", label, member, lineage_segments(member), trial.axis))
    return out


def experiment_metric(experiment_dir: str | pathlib.Path) -> str | None:
    """The metric the experiment was run with (`TuneConfig(metric=...)`), from the newest
    experiment state Tune wrote; None when there is none to read."""
    states = sorted(pathlib.Path(experiment_dir).glob("experiment_state-*.json"))
    if not states:
        return None
    try:
        metric = json.loads(states[-1].read_text()).get("runner_data", {}).get("_metric")
    except (OSError, ValueError, AttributeError):
        return None
    return metric if isinstance(metric, str) and metric else None


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_flatten(value, f"{prefix}{key}/"))
        return out
    return {prefix.rstrip("/"): tree}


def _differing_keys(params: list[dict[str, Any]]) -> dict[str, str]:
    """Keys whose values differ across trials, each with the shortest unambiguous name; names
    (a sampler's, an agent's) first, since labels are cut short."""
    keys = sorted({k for p in params for k in p}, key=lambda k: (k.split("/")[-1] != "name", k))
    differing = [k for k in keys if len({json.dumps(p.get(k), sort_keys=True, default=str) for p in params}) > 1]
    names = {}
    for key in differing:
        parts = key.split("/")
        for n in range(1, len(parts) + 1):
            name = "/".join(parts[-n:])
            if sum(other.split("/")[-n:] == parts[-n:] for other in differing) == 1:
                break
        names[key] = name
    return names


def _short(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.3g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str)
        return text if len(text) <= 16 else text[:15] + "…"
    return str(value)
