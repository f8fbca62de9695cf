"""Per-env statistics of one call, as samplers read them, and the task histogram results carry.

The loop reports, per seed and env (`CallStats`, `[num_seeds, num_envs]`), the task the env ran,
the episodes it finished, their return and success sums, the steps it took and a learning
signal from the agent. Every env of every seed is one sample of its task: seeds train the same
tasks, so they are extra evidence about them, not other tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ajax_tune.loop.state import CallStats
from ajax_tune.results.keys import HISTOGRAM_PREFIX

MAX_HISTOGRAM_BINS = 16


@dataclasses.dataclass(frozen=True)
class EnvStats:
    """One call's samples, flattened over seeds: sample `s * num_envs + e` is env `e` of seed `s`."""

    num_seeds: int
    num_envs: int
    tasks: dict[str, np.ndarray]  # [samples, *field shape]
    episodes: np.ndarray  # [samples] episodes finished
    return_sum: np.ndarray
    success_sum: np.ndarray  # NaN where the env reports no success
    learning_signal: np.ndarray  # NaN where the agent supplies none
    steps: np.ndarray

    @classmethod
    def from_call(cls, stats: CallStats) -> EnvStats:
        """From the loop's per-env sums of one call (on the host)."""
        episodes = np.asarray(stats.episodes, np.float64)
        if episodes.ndim != 2:
            raise ValueError(f"per-env statistics are [num_seeds, num_envs], got episodes of shape {episodes.shape}")
        num_seeds, num_envs = episodes.shape
        flat = lambda x: np.asarray(x).reshape(num_seeds * num_envs, *np.shape(x)[2:])  # noqa: E731
        # the mean in the loop's own precision (float32), as the signal always reached samplers
        count = np.asarray(stats.signal_count)
        signal = np.asarray(stats.signal_sum) / np.where(count > 0, count, np.nan).astype(count.dtype)
        return cls(
            num_seeds=num_seeds,
            num_envs=num_envs,
            tasks={k: flat(v) for k, v in stats.task.items()},
            episodes=flat(episodes),
            return_sum=flat(np.asarray(stats.return_sum, np.float64)),
            success_sum=flat(np.asarray(stats.success_sum, np.float64)),
            learning_signal=flat(signal.astype(np.float64)),
            steps=flat(np.asarray(stats.steps, np.float64)),
        )

    def per_env(self, values: np.ndarray) -> np.ndarray:
        """`values` of the samples as [num_seeds, num_envs]."""
        return np.asarray(values).reshape(self.num_seeds, self.num_envs, *np.shape(values)[1:])


def bin_totals(bins: np.ndarray, values: np.ndarray, num_bins: int) -> np.ndarray:
    """Sum of `values` per bin (samples with bin -1 left out)."""
    keep = bins >= 0
    return np.bincount(bins[keep], weights=values[keep], minlength=num_bins).astype(np.float64)


class TaskHistogram:
    """The share of envs that trained on each part of a task field's range, under stable keys:
    `tasks/<field>/bin<i>` (shares summing to 1), `tasks/<field>/low` and `/high` (the range
    cut into equal bins), and `tasks/<field>/mean`. Integer fields with few values get one bin
    per value. Only scalar fields are counted."""

    def __init__(self, ranges: Mapping[str, tuple[float, float]], integer: Mapping[str, bool]):
        self.edges = {}
        for name, (low, high) in ranges.items():
            if integer.get(name, False):
                count = int(high - low) + 1
                bins = count if count <= MAX_HISTOGRAM_BINS else MAX_HISTOGRAM_BINS
                low, high = low - 0.5, high + 0.5
            else:
                bins = MAX_HISTOGRAM_BINS if high > low else 1
                high = high if high > low else low + 1.0
            self.edges[name] = np.linspace(low, high, bins + 1)

    def keys(self) -> list[str]:
        keys = []
        for name, edges in self.edges.items():
            keys += [f"{HISTOGRAM_PREFIX}{name}/{k}" for k in ("low", "high", "mean")]
            keys += [f"{HISTOGRAM_PREFIX}{name}/bin{i}" for i in range(len(edges) - 1)]
        return keys

    def __call__(self, tasks: Mapping[str, np.ndarray]) -> dict[str, float]:
        out = {}
        for name, edges in self.edges.items():
            values = np.asarray(tasks[name], np.float64).reshape(-1)
            index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
            counts = np.bincount(index, minlength=len(edges) - 1)
            out[f"{HISTOGRAM_PREFIX}{name}/low"] = float(edges[0])
            out[f"{HISTOGRAM_PREFIX}{name}/high"] = float(edges[-1])
            out[f"{HISTOGRAM_PREFIX}{name}/mean"] = float(values.mean()) if len(values) else float("nan")
            for i, c in enumerate(counts):
                out[f"{HISTOGRAM_PREFIX}{name}/bin{i}"] = float(c / max(len(values), 1))
        return out
