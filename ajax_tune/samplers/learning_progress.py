"""Learning progress: train where the agent's competence is changing fastest.

The idea comes from the teacher-student curricula of Portelas et al. (2019, absolute learning
progress) and Kanitscheider et al. (2021, the difference of a fast and a slow moving average of
success per task), as packaged by Syllabus (Sullivan et al., 2024). Here: the space is cut into
bins; after every call each bin that finished episodes gets its success rate (or its return
mapped to [0, 1]); a fast and a slow exponential moving average follow it, and their absolute
difference is the bin's learning progress. Tasks are drawn from bins in proportion to it, with a
uniform share so that no bin is ever forgotten or left unseen.

Solved bins (both averages at 1) and hopeless ones (both at 0) have no progress; a bin whose
success is rising (or falling: forgetting) has much.
"""

from __future__ import annotations

import math

import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.samplers.base import TaskSampler, check_number, normalized_entropy
from ajax_tune.samplers.competence import Competence
from ajax_tune.samplers.stats import EnvStats, bin_totals


class LearningProgress(TaskSampler):
    """Sample bins in proportion to |fast EMA - slow EMA| of their score.

    - `bins`: parts each range of the space is cut into (a grid over several ranges; a level or
      a value of a set is its own bin);
    - `metric`: "success" (the success rate of the bin's episodes) or "return" (the mean episode
      return, mapped from `return_range` [low, high] to [0, 1] and clipped);
    - `fast`, `slow`: the averages' step sizes per call (0 < slow < fast <= 1); a bin's first
      score sets both, so a bin shows progress only once its score has moved;
    - `uniform_share`: the share of probability spread evenly over all bins.
    """

    reads_learning_signal = False

    def __init__(
        self,
        space=None,
        levels=None,
        *,
        bins=8,
        metric: str = "success",
        return_range=None,
        fast: float = 0.5,
        slow: float = 0.1,
        uniform_share: float = 0.2,
        seed: int = 0,
    ):
        super().__init__(space, levels, bins=bins, seed=seed)
        where = "task_sampler (LearningProgress)"
        self.task_scoring = Competence(where, metric, return_range)
        self.metric, self.return_range = self.task_scoring.metric, self.task_scoring.return_range
        self.fast = float(check_number(where, "fast", fast, low=0.0, high=1.0, low_open=True))
        self.slow = float(check_number(where, "slow", slow, low=0.0, high=1.0, low_open=True))
        if not self.slow < self.fast:
            raise ConfigError(f"{where}: slow ({slow}) must be smaller than fast ({fast})")
        self.uniform_share = float(check_number(where, "uniform_share", uniform_share, low=0.0, high=1.0))

    def bind(self, env, base=None, env_levels=None):
        self.task_scoring.check_env(env)
        return super().bind(env, base=base, env_levels=env_levels)

    def _bound(self):
        n = self.space.num_bins
        self.fast_avg, self.slow_avg = np.zeros(n), np.zeros(n)
        self.seen = np.zeros(n, bool)
        self.episodes = np.zeros(n)

    # -- learning ------------------------------------------------------------------------

    def scores(self, stats: EnvStats) -> tuple[np.ndarray, np.ndarray]:
        """This call's score per bin, and which bins finished any episode."""
        n = self.space.num_bins
        bins = self.space.bin_of(stats.tasks)
        episodes = bin_totals(bins, stats.episodes, n)
        observed = episodes > 0
        done = (bins >= 0) & (stats.episodes > 0)
        score = self.task_scoring.score(
            episodes,
            bin_totals(bins, np.nan_to_num(stats.success_sum), n),
            bin_totals(bins, stats.return_sum, n),
            stats.success_sum[done],
        )
        return score, observed

    def _update(self, stats):
        score, observed = self.scores(stats)
        first = observed & ~self.seen
        again = observed & self.seen
        self.fast_avg[first] = self.slow_avg[first] = score[first]
        self.fast_avg[again] += self.fast * (score[again] - self.fast_avg[again])
        self.slow_avg[again] += self.slow * (score[again] - self.slow_avg[again])
        self.seen |= observed
        self.episodes += bin_totals(self.space.bin_of(stats.tasks), stats.episodes, self.space.num_bins)

    def progress(self) -> np.ndarray:
        return np.abs(self.fast_avg - self.slow_avg)

    def probabilities(self) -> np.ndarray:
        progress = self.progress()
        n = len(progress)
        total = progress.sum()
        if total <= 0:
            return np.full(n, 1.0 / n)
        return (1.0 - self.uniform_share) * progress / total + self.uniform_share / n

    def _sample(self, num_envs):
        bins = self.rng.choice(self.space.num_bins, size=num_envs, p=self.probabilities())
        return self.space.draw_in_bins(self.rng, bins)

    # -- state and metrics ---------------------------------------------------------------

    def _state(self):
        return {
            "fast": self.fast_avg.tolist(),
            "slow": self.slow_avg.tolist(),
            "seen": self.seen.tolist(),
            "episodes": self.episodes.tolist(),
        }

    def _load(self, state):
        if len(state["fast"]) != self.space.num_bins:
            raise ValueError(f"LearningProgress state has {len(state['fast'])} bins; this space has {self.space.num_bins}")
        self.fast_avg, self.slow_avg = np.array(state["fast"], np.float64), np.array(state["slow"], np.float64)
        self.seen, self.episodes = np.array(state["seen"], bool), np.array(state["episodes"], np.float64)

    def _metrics(self):
        progress = self.progress()
        return {
            "sampler/progress_mean": float(progress.mean()),
            "sampler/progress_max": float(progress.max()),
            "sampler/score_mean": float(self.slow_avg[self.seen].mean()) if self.seen.any() else math.nan,
            "sampler/bins_seen": float(self.seen.mean()),
            "sampler/entropy": normalized_entropy(self.probabilities()),
        }
