"""ALP-GMM: learning progress over a continuous task space, with no bins to choose.

After Portelas, Colas, Hofmann and Oudeyer (2019, "Teacher algorithms for curriculum learning
of Deep RL in continuously parameterized environments"). Each task an env ran is a point in the
space's ranges (scaled to [0, 1]); its competence is its episodes' success rate (or mean return
mapped to [0, 1]); its absolute learning progress (ALP) is the difference from the competence of
the nearest task in the history before it. A Gaussian mixture is fitted to the recent
(task, ALP) points, its number of components chosen by AIC; a new task comes from a component
drawn in proportion to its mean ALP, or, with probability `random_share` (and always before
`bootstrap` tasks are known), uniformly from the space.

Tasks run for a whole call here, so one env's call is one point; the seeds of a trial run the
same tasks, so their competences are averaged into it. The history, the mixture and the random
stream are the sampler's state: a restored trial (or a PBT exploit) continues with them, and
since a task is data nothing recompiles as the mixture moves.
"""

from __future__ import annotations

import math

import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.samplers.base import TaskSampler, check_number
from ajax_tune.samplers.competence import Competence
from ajax_tune.samplers.gmm import Mixture, fit_best
from ajax_tune.samplers.stats import EnvStats


class ALPGMM(TaskSampler):
    """Sample tasks from a Gaussian mixture fitted to absolute learning progress.

    - `metric`, `return_range`: a task's competence, as for `learning_progress`;
    - `fit_window`: how many of the latest tasks the mixture is fitted to (refitted every call);
    - `max_components`: the mixture has 1 to this many components (the lowest AIC wins);
    - `random_share`: the share of tasks drawn uniformly from the space once the mixture exists;
    - `bootstrap`: tasks drawn uniformly before the first fit;
    - `history`: the most tasks remembered for the nearest-neighbour look-up.
    """

    reads_learning_signal = False

    def __init__(
        self,
        space=None,
        levels=None,
        *,
        metric: str = "success",
        return_range=None,
        fit_window: int = 256,
        max_components: int = 6,
        random_share: float = 0.2,
        bootstrap: int | None = None,
        history: int = 4096,
        seed: int = 0,
    ):
        super().__init__(space, levels, seed=seed)
        where = "task_sampler (ALPGMM)"
        if levels is not None:
            raise ConfigError(f"{where}: ALP-GMM fits a mixture over ranges of a space; for a list of levels use plr")
        self.task_scoring = Competence(where, metric, return_range)
        self.metric, self.return_range = self.task_scoring.metric, self.task_scoring.return_range
        self.fit_window = check_number(where, "fit_window", fit_window, low=2, integer=True)
        self.max_components = check_number(where, "max_components", max_components, low=1, integer=True)
        self.random_share = float(check_number(where, "random_share", random_share, low=0.0, high=1.0))
        bootstrap = self.fit_window if bootstrap is None else bootstrap
        self.bootstrap = check_number(where, "bootstrap", bootstrap, low=2, integer=True)
        self.history_size = check_number(where, "history", history, low=self.fit_window, integer=True)

    def bind(self, env, base=None, env_levels=None):
        self.task_scoring.check_env(env)
        return super().bind(env, base=base, env_levels=env_levels)

    def _bound(self):
        if self.space.levels is not None:
            raise ConfigError("task_sampler (ALPGMM) needs a space with ranges, not levels")
        sets = [name for name, (kind, _) in self.space.entries.items() if kind == "values"]
        self.ranges = [name for name, (kind, _) in self.space.entries.items() if kind == "range"]
        if sets or not self.ranges:
            raise ConfigError(
                f"task_sampler (ALPGMM) fits a mixture over ranges [low, high]; "
                f"{'the sets ' + str(sets) + ' are not ranges' if sets else 'the space has none'}"
            )
        d = len(self.ranges)
        self.points = np.zeros((0, d))  # tasks scaled to [0, 1]
        self.competence = np.zeros(0)
        self.alp = np.zeros(0)
        self.mixture: Mixture | None = None
        self.random_drawn = math.nan

    # -- learning ------------------------------------------------------------------------

    def _scale(self, tasks) -> np.ndarray:
        columns = []
        for name in self.ranges:
            low, high = self.space.entries[name][1]
            columns.append((np.asarray(tasks[name], np.float64).reshape(-1) - low) / (high - low))
        return np.stack(columns, axis=1)

    def task_competence(self, stats: EnvStats) -> tuple[np.ndarray, np.ndarray]:
        """Each env's task (scaled, [num_envs, d]) and its competence over the seeds' episodes;
        envs that finished no episode, or ran a task outside the space, are left out."""
        episodes = stats.per_env(stats.episodes).sum(axis=0)
        score = self.task_scoring.score(
            episodes,
            stats.per_env(np.nan_to_num(stats.success_sum)).sum(axis=0),
            stats.per_env(stats.return_sum).sum(axis=0),
            stats.success_sum[stats.episodes > 0],
        )
        first_seed = {k: stats.per_env(v)[0] for k, v in stats.tasks.items()}
        points = self._scale(first_seed)
        keep = (episodes > 0) & np.all((points >= -1e-6) & (points <= 1 + 1e-6), axis=1)
        return points[keep], score[keep]

    def _update(self, stats):
        points, score = self.task_competence(stats)
        if not len(points):
            return
        if len(self.points):
            nearest = np.argmin(((points[:, None, :] - self.points[None, :, :]) ** 2).sum(axis=2), axis=1)
            alp = np.abs(score - self.competence[nearest])
        else:
            alp = np.zeros(len(points))
        keep = self.history_size
        self.points = np.concatenate([self.points, points])[-keep:]
        self.competence = np.concatenate([self.competence, score])[-keep:]
        self.alp = np.concatenate([self.alp, alp])[-keep:]
        if len(self.points) >= self.bootstrap:
            window = np.concatenate([self.points, self.alp[:, None]], axis=1)[-self.fit_window :]
            self.mixture = fit_best(window, self.max_components, self.rng)

    # -- sampling ------------------------------------------------------------------------

    def component_probabilities(self) -> np.ndarray:
        """Each component's chance of proposing a task: its mean ALP (the last coordinate)."""
        progress = np.maximum(self.mixture.means[:, -1], 0.0)
        total = progress.sum()
        return progress / total if total > 0 else np.full(len(progress), 1.0 / len(progress))

    def _sample(self, num_envs):
        tasks = self.space.draw(self.rng, num_envs)
        if self.mixture is None:
            self.random_drawn = 1.0
            return tasks
        guided = self.rng.random(num_envs) >= self.random_share
        self.random_drawn = float(1.0 - guided.mean())
        count = int(guided.sum())
        if count:
            d = len(self.ranges)
            which = self.rng.choice(len(self.mixture.weights), size=count, p=self.component_probabilities())
            noise = self.rng.standard_normal((count, d))
            chol = np.linalg.cholesky(self.mixture.covs[:, :d, :d])  # [k, d, d]
            scaled = np.clip(self.mixture.means[which, :d] + np.einsum("nij,nj->ni", chol[which], noise), 0.0, 1.0)
            for i, name in enumerate(self.ranges):
                low, high = self.space.entries[name][1]
                field = self.space.spec[name]
                value = low + scaled[:, i] * (high - low)
                if field.is_integer:
                    value = np.clip(np.rint(value), low, high)
                else:
                    value = np.clip(value.astype(field.dtype), np.float32(low), np.float32(high))
                tasks[name][guided] = value.astype(field.dtype)
        return tasks

    # -- state and metrics ---------------------------------------------------------------

    def _state(self):
        return {
            "points": self.points.tolist(),
            "competence": self.competence.tolist(),
            "alp": self.alp.tolist(),
            "mixture": None if self.mixture is None else self.mixture.to_json(),
            "random_drawn": self.random_drawn,
        }

    def _load(self, state):
        d = len(self.ranges)
        points = np.array(state["points"], np.float64).reshape(-1, d)
        self.points, self.competence, self.alp = points, np.array(state["competence"]), np.array(state["alp"])
        self.mixture = None if state["mixture"] is None else Mixture.from_json(state["mixture"])
        if self.mixture is not None and self.mixture.means.shape[1] != d + 1:
            raise ValueError(f"ALPGMM state is over {self.mixture.means.shape[1] - 1} ranges; this space has {d}")
        self.random_drawn = float(state["random_drawn"])

    def _metrics(self):
        recent = slice(-self.fit_window, None)
        return {
            "sampler/components": float(len(self.mixture.weights)) if self.mixture is not None else 0.0,
            "sampler/alp_mean": float(self.alp[recent].mean()) if len(self.alp) else math.nan,
            "sampler/score_mean": float(self.competence[recent].mean()) if len(self.competence) else math.nan,
            "sampler/random_share": self.random_drawn,
        }
