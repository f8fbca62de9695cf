"""How well the agent does on a task, as the learning-progress samplers read it: the success rate
of its episodes, or their mean return mapped from `return_range` [low, high] to [0, 1] and
clipped. Both `learning_progress` (per bin) and `alp_gmm` (per env) score tasks this way."""

from __future__ import annotations

import numpy as np

from ajax_tune.errors import ConfigError

METRICS = ("success", "return")


class Competence:
    """A sampler's `metric` and `return_range`, checked once, and the score they define."""

    def __init__(self, where: str, metric: str, return_range):
        if metric not in METRICS:
            raise ConfigError(f"{where}: metric must be one of {list(METRICS)}, got {metric!r}")
        if metric == "return" and (
            not isinstance(return_range, (list, tuple))
            or len(return_range) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in return_range)
            or not return_range[0] < return_range[1]
        ):
            raise ConfigError(
                f"{where}: metric 'return' needs return_range: [low, high] with low < high "
                f"(the returns mapped to 0 and 1), got {return_range!r}"
            )
        self.sampler = where.removeprefix("task_sampler (").removesuffix(")")
        self.metric = metric
        self.return_range = None if return_range is None else (float(return_range[0]), float(return_range[1]))

    def check_env(self, env) -> None:
        """Before compiling: a success metric needs an env that reports success."""
        if self.metric == "success" and not env.has_success:
            raise ConfigError(
                f"task_sampler ({self.sampler}): metric 'success' needs an env that reports success, "
                f"and {env.name} does not; use metric: return with a return_range"
            )

    def score(self, episodes: np.ndarray, success: np.ndarray, returns: np.ndarray, reported_success: np.ndarray):
        """Per group (a bin, an env): the score of its `episodes` from their summed `success` and
        `returns`; 0 where it finished none. `reported_success` holds the raw success sums of the
        samples that finished episodes (NaN where the env reports none)."""
        if self.metric == "success":
            if reported_success.size and np.all(np.isnan(reported_success)):
                raise ValueError(
                    f"{self.sampler} with metric 'success' needs an env that reports success; "
                    "this one does not: use metric: return with a return_range"
                )
            return np.divide(success, episodes, out=np.zeros(len(episodes)), where=episodes > 0)
        mean = np.divide(returns, episodes, out=np.zeros(len(episodes)), where=episodes > 0)
        low, high = self.return_range
        return np.clip((mean - low) / (high - low), 0.0, 1.0)
