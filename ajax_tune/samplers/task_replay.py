"""Prioritized task replay: the task sampler that revisits, between calls, the tasks of its space
the agent still learns most from (`task_sampler: {name: plr}`).

It is prioritized level replay run on the host over a task sampler's space, a call at a time. The
level algorithm of the same name (`ued.algorithm: plr`, in `ued/`) runs inside the compiled program
and decides every rollout; this one decides each env's task for a whole call.

After Jiang, Grefenstette and Rocktäschel (2021, "Prioritized Level Replay") and its robust
variant (Jiang et al., 2021, "Replay-Guided Adversarial Environment Design"). A fixed buffer
holds levels with a score each; the score is the agent's learning signal on the level (for PPO,
the mean positive GAE advantage, i.e. positive value loss: where its value estimates are still
wrong). For each env, with probability `replay_prob` (once the buffer holds `min_fill` levels)
a buffered level is replayed, drawn from

    P = (1 - staleness) * P_score + staleness * P_stale
    P_score(i) ∝ (1 / rank(score_i)) ** (1 / temperature)      rank 1: the highest score
    P_stale(i) ∝ calls since level i was last drawn

otherwise a new level is drawn from the space (a level not yet buffered, for a finite set). After
the call every level an env ran gets that env's learning signal (averaged over the seeds and the
envs that ran it) as its new score; a new level joins the buffer while it has room, and later
replaces the lowest-scored level if it scores higher.

Granularity is the call: levels are drawn per env for a whole call, and staleness counts calls.
"""

from __future__ import annotations

import math

import numpy as np

from ajax_tune.samplers.base import TaskSampler, check_number, normalized_entropy, tasks_from_json, tasks_to_json
from ajax_tune.samplers.stats import EnvStats


class PrioritizedTaskReplay(TaskSampler):
    """Rank-prioritised replay of a buffer of levels scored by the agent's learning signal."""

    def __init__(
        self,
        space=None,
        levels=None,
        *,
        buffer_size: int = 16,
        temperature: float = 0.1,
        staleness: float = 0.1,
        replay_prob: float = 0.5,
        min_fill: int | None = None,
        seed: int = 0,
    ):
        super().__init__(space, levels, seed=seed)
        where = "task_sampler (PrioritizedTaskReplay)"
        self.buffer_size = check_number(where, "buffer_size", buffer_size, low=1, integer=True)
        self.temperature = float(check_number(where, "temperature", temperature, low=0.0, low_open=True))
        self.staleness = float(check_number(where, "staleness", staleness, low=0.0, high=1.0))
        self.replay_prob = float(check_number(where, "replay_prob", replay_prob, low=0.0, high=1.0))
        min_fill = self.buffer_size if min_fill is None else min_fill
        self.min_fill = check_number(where, "min_fill", min_fill, low=1, high=self.buffer_size, integer=True)

    def _bound(self):
        self.buffer: dict[str, np.ndarray] = {}  # field -> [filled, *shape]
        self.scores = np.zeros(0)
        self.last_drawn = np.zeros(0, np.int64)
        self.clock = 0  # sample calls so far
        self.pending_slots = np.zeros(0, np.int64)  # per env of the next call: buffer slot, -1: a new level
        self.pending_tasks: dict[str, np.ndarray] = {}
        self.replay_share = math.nan

    @property
    def filled(self) -> int:
        return len(self.scores)

    # -- sampling ------------------------------------------------------------------------

    def score_probabilities(self) -> np.ndarray:
        """P_score over the buffered levels: rank prioritisation with `temperature`."""
        order = np.argsort(-self.scores, kind="stable")
        ranks = np.empty(self.filled)
        ranks[order] = np.arange(1, self.filled + 1)
        weights = (1.0 / ranks) ** (1.0 / self.temperature)
        return weights / weights.sum()

    def staleness_probabilities(self) -> np.ndarray:
        stale = (self.clock - self.last_drawn).astype(np.float64)
        total = stale.sum()
        return stale / total if total > 0 else np.full(self.filled, 1.0 / self.filled)

    def replay_probabilities(self) -> np.ndarray:
        return (1.0 - self.staleness) * self.score_probabilities() + self.staleness * self.staleness_probabilities()

    def _sample(self, num_envs):
        replay = np.zeros(num_envs, bool)
        if self.filled >= self.min_fill:
            replay = self.rng.random(num_envs) < self.replay_prob
        slots = np.full(num_envs, -1, np.int64)
        if replay.any():
            slots[replay] = self.rng.choice(self.filled, size=int(replay.sum()), p=self.replay_probabilities())
        new = self._new_levels(int((~replay).sum()))
        self.clock += 1
        self.last_drawn[slots[replay]] = self.clock
        tasks = {}
        for k in self.space.fields:
            field = self.space.spec[k]
            column = np.zeros((num_envs, *field.shape), field.dtype)
            if replay.any():
                column[replay] = self.buffer[k][slots[replay]]
            if (~replay).any():
                column[~replay] = new[k]
            tasks[k] = column
        self.pending_slots, self.pending_tasks = slots, tasks
        self.replay_share = float(replay.mean())
        return {k: v.copy() for k, v in tasks.items()}

    def _new_levels(self, count: int) -> dict[str, np.ndarray]:
        """Draws from the space; from a finite set of levels, ones not buffered yet (distinct while
        there are enough)."""
        space = self.space
        if space.levels is None or count == 0:
            return space.draw(self.rng, count)
        every = np.arange(len(space.levels))
        fresh = every[self._find(space.level_tasks(every)) < 0]
        pool = fresh if len(fresh) else every
        return space.level_tasks(self.rng.choice(pool, size=count, replace=count > len(pool)))

    def _find(self, tasks: dict[str, np.ndarray]) -> np.ndarray:
        """The buffer slot of each task of a batch, -1 where it is not buffered."""
        count = len(next(iter(tasks.values())))
        out = np.full(count, -1, np.int64)
        for slot in range(self.filled - 1, -1, -1):
            match = np.ones(count, bool)
            for k in self.space.fields:
                match &= np.all(np.asarray(tasks[k]).reshape(count, -1) == self.buffer[k][slot].reshape(1, -1), axis=1)
            out[match] = slot
        return out

    # -- learning ------------------------------------------------------------------------

    def env_scores(self, stats: EnvStats) -> np.ndarray:
        """Each env's learning signal, averaged over seeds; NaN for an env that did not run the
        task this sampler gave it (another curriculum changed it)."""
        signal = stats.per_env(stats.learning_signal)
        if np.all(np.isnan(signal)):
            raise ValueError(
                "PrioritizedTaskReplay scores tasks by the agent's learning signal "
                "(the third value its update returns), and this agent reports none"
            )
        counted = (~np.isnan(signal)).sum(axis=0)
        scores = np.where(counted > 0, np.nansum(signal, axis=0) / np.maximum(counted, 1), np.nan)
        ran = np.ones(stats.num_envs, bool)
        for k in self.space.fields:
            given = np.asarray(self.pending_tasks[k]).reshape(stats.num_envs, -1)
            trained = stats.per_env(stats.tasks[k])[0].reshape(stats.num_envs, -1).astype(given.dtype)
            ran &= np.all(trained == given, axis=1)
        return np.where(ran, scores, np.nan)

    def _update(self, stats):
        if len(self.pending_slots) != stats.num_envs:
            return  # tasks this sampler did not draw (none yet): nothing to score
        scores = self.env_scores(stats)
        slots = self.pending_slots
        for slot in np.unique(slots[slots >= 0]):
            values = scores[(slots == slot) & ~np.isnan(scores)]
            if len(values):
                self.scores[slot] = values.mean()
        new = np.nonzero((slots < 0) & ~np.isnan(scores))[0]
        done = np.zeros(len(new), bool)
        for i, env in enumerate(new):
            if done[i]:
                continue
            task = {k: v[env : env + 1] for k, v in self.pending_tasks.items()}
            # envs that drew the same new level (a small set, an integer range) score it together
            same = np.ones(len(new), bool)
            for k in self.space.fields:
                flat = np.asarray(self.pending_tasks[k])[new].reshape(len(new), -1)
                same &= np.all(flat == np.asarray(task[k]).reshape(1, -1), axis=1)
            same &= ~done
            done |= same
            self._insert(task, float(scores[new[same]].mean()))
        self.pending_slots = np.zeros(0, np.int64)

    def _insert(self, task: dict[str, np.ndarray], score: float) -> None:
        slot = int(self._find(task)[0]) if self.filled else -1
        if slot < 0 and self.filled < self.buffer_size:
            slot = self.filled
            self.buffer = {
                k: (np.concatenate([self.buffer[k], task[k]]) if self.buffer else task[k].copy()) for k in self.space.fields
            }
            self.scores = np.append(self.scores, score)
            self.last_drawn = np.append(self.last_drawn, self.clock)
            return
        if slot < 0:
            slot = int(np.argmin(self.scores))
            if score <= self.scores[slot]:
                return
            for k in self.space.fields:
                self.buffer[k][slot] = task[k][0]
        self.scores[slot] = score
        self.last_drawn[slot] = self.clock

    # -- state and metrics ---------------------------------------------------------------

    def _state(self):
        return {
            "buffer": tasks_to_json(self.buffer),
            "scores": self.scores.tolist(),
            "last_drawn": self.last_drawn.tolist(),
            "clock": self.clock,
            "pending_slots": self.pending_slots.tolist(),
            "pending_tasks": tasks_to_json(self.pending_tasks),
            "replay_share": self.replay_share,
        }

    def _load(self, state):
        spec = self.space.spec
        self.buffer = tasks_from_json(state["buffer"], spec)
        self.scores = np.array(state["scores"], np.float64)
        self.last_drawn = np.array(state["last_drawn"], np.int64)
        self.clock = int(state["clock"])
        self.pending_slots = np.array(state["pending_slots"], np.int64)
        self.pending_tasks = tasks_from_json(state["pending_tasks"], spec)
        self.replay_share = float(state["replay_share"])

    def _metrics(self):
        filled = self.filled
        return {
            "sampler/buffer_fill": filled / self.buffer_size,
            "sampler/score_mean": float(self.scores.mean()) if filled else math.nan,
            "sampler/score_max": float(self.scores.max()) if filled else math.nan,
            "sampler/staleness_mean": float((self.clock - self.last_drawn).mean()) if filled else math.nan,
            "sampler/replay_share": self.replay_share,
            "sampler/entropy": normalized_entropy(self.replay_probabilities()) if filled >= 2 else math.nan,
        }
