"""Plots of a finished (or running) Tune experiment, from its trials' series (`results/series.py`).

Everything is drawn against `env_steps`, not `training_iteration`: under PBT Tune
rewinds the iteration counter after an exploit and the trial continues the donor's lineage, so
one trial's rows are several contiguous lineage segments. An offline trial steps no env: it is
drawn against `gradient_steps` instead. Each segment is drawn as its own line
(same colour per trial), which shows the path a trial actually followed through exploits
instead of zigzags joining unrelated points.

Figures are built on `matplotlib.figure.Figure` and saved with the Agg renderer; pyplot and the
global backend are never touched, so importing this module changes nothing for the caller.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ajax_tune.results.series import (
    HISTOGRAM_PREFIX,
    LEVEL,
    MAX_DISTRIBUTION_TRIALS,
    RETURN,
    STEP,
    TASK_PREFIX,
    TrialSeries,
    axis_label,
    experiment_metric,
    histogram_fields,
    learning_curve,
    load_trials,
    member_series,
    start_point,
    task_distribution,
)


def plot_experiment(
    experiment_dir: str | pathlib.Path, out_dir: str | pathlib.Path | None = None, metric: str | None = None
) -> list[pathlib.Path]:
    """Write learning_curves.png (the experiment's metric, and the evaluation return beside it
    when the metric is another; a population trial as one curve per member), learning_rates.png,
    (when a curriculum moved or reports levels) curriculum.png, with one subplot per task field
    that moved, and (when results carry task histograms, as with a task sampler)
    task_distribution.png; returns the paths.

    `metric` defaults to the one the experiment was run with, else the evaluation return."""
    trials = load_trials(experiment_dir)
    metric = metric or experiment_metric(experiment_dir) or RETURN
    out = pathlib.Path(out_dir) if out_dir is not None else pathlib.Path(experiment_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    colors = _colors(len(trials))
    curves = [curve for trial in trials for curve in (member_series(trial) or [trial])]
    written = [_save(learning_curves_figure(curves, _colors(len(curves)), metric), out / "learning_curves.png")]
    fields = _curriculum_fields(trials)
    if fields:
        written.append(_curriculum(trials, colors, fields, out / "curriculum.png"))
    histograms = histogram_fields(trials)
    if histograms:
        written.append(_task_distribution(trials, histograms, out / "task_distribution.png"))
    written.append(_learning_rates(trials, colors, out / "learning_rates.png"))
    return written


# -- figures -----------------------------------------------------------------------------


def learning_curves_figure(trials: list[TrialSeries], colors, metric: str = RETURN) -> Figure:
    """The experiment's metric against env steps and, when the metric is another quantity, the
    evaluation return beside it (band: min..max over seeds)."""
    shown = [metric] if metric == RETURN else [metric, RETURN]
    if not any(metric in t.frame and t.frame[metric].notna().any() for t in trials):
        shown = [RETURN]  # a metric the results never reported: the return alone, as before
    fig = Figure(figsize=(6.5 * len(shown) + 2.5, 5), layout="constrained")
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    for ax, column in zip(axes, shown):
        for trial, color in zip(trials, colors):
            label = trial.label
            for segment in trial.segments:
                x, y, lo, hi = metric_curve(segment, column)
                if not len(x):
                    continue
                ax.plot(x, y, color=color, marker=".", label=label)
                if not np.all(np.isnan(lo)):
                    ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
                label = None  # one legend entry per trial
        ax.set_xlabel(axis_label(trials))
        ax.set_ylabel(column if column != RETURN else f"{RETURN} (band: min..max over seeds)")
        ax.set_title(f"{column}{' (the experiment metric)' if column == metric and len(shown) > 1 else ''}")
        ax.grid(alpha=0.3)
    _legend(fig, axes[0])
    return fig


def metric_curve(segment: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(env_steps, value, low, high) of the rows that report `column`, from env step 0 where the
    start evaluation has its counterpart; the band is the seeds' spread for the return, NaN
    otherwise."""
    if column == RETURN:
        return learning_curve(segment)
    if column not in segment:
        return (np.zeros(0),) * 4
    rows = segment[segment[column].notna()]
    x, y = rows[STEP].to_numpy(np.float64), rows[column].to_numpy(np.float64)
    start = start_point(segment, column)
    if start is not None:
        x, y = np.concatenate([[0.0], x]), np.concatenate([[start], y])
    nan = np.full(len(x), np.nan)
    return x, y, nan, nan.copy()


def _curriculum(trials: list[TrialSeries], colors, fields: list[str], path: pathlib.Path) -> pathlib.Path:
    fig = Figure(figsize=(9, 2.4 * len(fields) + 1), layout="constrained")
    axes = fig.subplots(len(fields), 1, sharex=True, squeeze=False)[:, 0]
    for ax, column in zip(axes, fields):
        for i, (trial, color) in enumerate(zip(trials, colors)):
            label = trial.label
            # step lines of several trials often coincide: earlier trials drawn wider stay visible
            width = 1.2 + 2.4 * (len(trials) - 1 - i) / max(len(trials) - 1, 1)
            for segment in trial.segments:
                if column not in segment or segment[column].isna().all():
                    continue
                # a row's task held through its whole call, which ended at the row's env_steps
                x = np.concatenate([segment[STEP].iloc[:1] - segment["timesteps_this_iter"].iloc[:1], segment[STEP]])
                y = np.concatenate([segment[column].iloc[:1], segment[column]])
                ax.plot(x, y, color=color, drawstyle="steps-pre", linewidth=width, alpha=0.85, label=label)
                label = None
        ax.set_ylabel(column.removeprefix(TASK_PREFIX).removeprefix("curriculum/"))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(axis_label(trials))
    axes[0].set_title("curriculum: task trained on")
    _legend(fig, axes[0])
    return _save(fig, path)


def _task_distribution(trials: list[TrialSeries], fields: list[str], path: pathlib.Path) -> pathlib.Path:
    """One heat map per trial and field: the share of envs that trained on each part of the
    field's range, call by call."""
    shown = [t for t in trials if any(f"{HISTOGRAM_PREFIX}{f}/low" in t.frame for f in fields)][:MAX_DISTRIBUTION_TRIALS]
    fig = Figure(figsize=(max(9.0, 3.2 * len(shown) + 1.5), 2.6 * len(fields) + 0.8), layout="constrained")
    axes = fig.subplots(len(fields), len(shown), squeeze=False, sharex="col")
    mesh = None
    for col, trial in enumerate(shown):
        for row, field in enumerate(fields):  # noqa: F402
            ax = axes[row, col]
            for segment in trial.segments:
                x, y, shares = task_distribution(segment, field)
                if len(x):
                    mesh = ax.pcolormesh(x, y, shares, cmap="viridis", vmin=0.0, vmax=1.0, shading="flat")
            if row == 0:
                ax.set_title(trial.label, fontsize="small")
            if col == 0:
                ax.set_ylabel(field)
            if row == len(fields) - 1:
                ax.set_xlabel(axis_label(shown))
    if mesh is not None:
        fig.colorbar(mesh, ax=axes, label="share of envs", shrink=0.8)
    more = f" (first {len(shown)} of {len(trials)} trials)" if len(trials) > len(shown) else ""
    fig.suptitle(f"tasks trained on, per call{more}")
    return _save(fig, path)


def _learning_rates(trials: list[TrialSeries], colors, path: pathlib.Path) -> pathlib.Path:
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    for trial, color in zip(trials, colors):
        label = trial.label
        for segment in trial.segments:
            if "lr" in segment and segment["lr"].notna().any():
                ax.plot(segment[STEP], segment["lr"], color=color, marker=".", markersize=3, label=label)
                label = None
    lrs = np.concatenate([t.frame["lr"].to_numpy(np.float64) for t in trials if "lr" in t.frame] or [np.ones(1)])
    lrs = lrs[np.isfinite(lrs)]
    if lrs.size and lrs.min() > 0 and lrs.max() / lrs.min() > 20:  # PBT spreads span decades
        ax.set_yscale("log")
    _finish(fig, ax, axis_label(trials), "learning rate (at the end of each call)", "learning rate per lineage segment")
    return _save(fig, path)


# -- helpers -----------------------------------------------------------------------------


def _curriculum_fields(trials: list[TrialSeries]) -> list[str]:
    """The task fields that moved, and the level if reported; none if the curriculum never moved
    and has no levels (a fixed task is not worth a figure)."""
    columns = sorted({c for t in trials for c in t.frame.columns if c.startswith(TASK_PREFIX)})
    moved = [c for c in columns if pd.concat([t.frame[c] for t in trials if c in t.frame]).nunique() > 1]
    levels = [LEVEL] if any(LEVEL in t.frame for t in trials) else []
    return moved + levels


def _finish(fig: Figure, ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend(fig, ax)


def _legend(fig: Figure, ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        # outside the axes: ten long labels would otherwise cover the curves
        fig.legend(handles, labels, loc="outside right upper", fontsize="small", frameon=False)


def _save(fig: Figure, path: pathlib.Path) -> pathlib.Path:
    fig.savefig(path, dpi=110)
    return path


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]
